// CUDA device (see cuda_device.h): cudaMalloc/cudaHostAlloc memory with accounting, non-blocking
// streams, events, async copies, host tasks via cudaLaunchHostFunc, kernel ops via launch().
#include "device/cuda_device.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "core/cuda_check.h"
#include "core/cuda_sync.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "core/trace.h"
#include "kernels/scratch.h"

namespace sof::device {

namespace {

constexpr size_t kAlign = 256;
size_t round_up(size_t n) {
    return n == 0 ? kAlign : (n + kAlign - 1) / kAlign * kAlign;
}

// ---- streams, events, host tasks ----

// Error slot of one stream: the first exception thrown by one of its host tasks.
struct StreamState {
    std::mutex mu;
    std::exception_ptr error;
    // Rethrows (once) that exception.
    void rethrow() {
        std::exception_ptr e;
        {
            std::lock_guard<std::mutex> lk(mu);
            e = error;
            error = nullptr;
        }
        if (e) std::rethrow_exception(e);
    }
};

class CudaEvent : public Event {
  public:
    CudaEvent(int ordinal, bool timing) : ordinal_(ordinal), timing_(timing) {
        SOF_CHECK_CUDA(cudaSetDevice(ordinal));
        SOF_CHECK_CUDA(
            cudaEventCreateWithFlags(&ev_, timing ? cudaEventDefault : cudaEventDisableTiming));
    }
    ~CudaEvent() override { // possibly on another thread than the creator's: the device first
        cudaSetDevice(ordinal_);
        cudaEventDestroy(ev_);
        (void)cudaGetLastError(); // nothing to report it to; not blamed on the next launch
    }
    // query and synchronize are the first CUDA calls of the engine's optimizer worker and the
    // comm lane (threads of their own, which start on device 0): the device first, so that no
    // thread of a rank on GPU k creates a context on GPU 0
    bool query() override {
        SOF_CHECK_CUDA(cudaSetDevice(ordinal_));
        const cudaError_t e = cudaEventQuery(ev_);
        if (e == cudaErrorNotReady) {
            (void)cudaGetLastError();
            return false;
        }
        SOF_CHECK_CUDA_STATUS(e, "cudaEventQuery(ev_)");
        return true;
    }
    void synchronize() override {
        SOF_CHECK_CUDA(cudaSetDevice(ordinal_));
        SOF_CHECK_CUDA(cudaEventSynchronize(ev_));
    }
    bool timing() const override { return timing_; }
    cudaEvent_t handle() const { return ev_; }
    std::atomic<bool> recorded{false}; // set by CudaDevice::record (elapsed_ms refuses an
                                       // unrecorded event); any thread may record

  private:
    int ordinal_;
    bool timing_;
    cudaEvent_t ev_ = nullptr;
};

// With SOF_CUDA_SYNC=1: synchronizes the stream after an op and names it when its work failed.
void sync_check(cudaStream_t s, const char* what, const std::string& name) {
    if (!core::cuda_sync_mode()) return;
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    SOF_FAIL(Runtime,
             "CUDA %s '%s' failed (SOF_CUDA_SYNC: the stream was synchronized after it): %s (%s)",
             what, name.c_str(), cudaGetErrorName(e), cudaGetErrorString(e));
}

struct Registry;

class CudaStream : public Stream {
  public:
    CudaStream(std::string name, int ordinal, core::Trace* trace, std::shared_ptr<Registry> reg);
    ~CudaStream() override;
    const std::string& name() const override { return name_; }
    void* native() const override { return static_cast<void*>(stream_); }
    cudaStream_t handle() const { return stream_; }
    // Scratch of the ops launched on this stream through Device::launch (grad_prep with host
    // bounds): plain cudaMalloc memory outside the device's accounting, like the cuBLASLt
    // workspace, allocated on first use (none of the engine's or the model's ops use it).
    kernels::Scratch* scratch() const { return scratch_.get(); }
    const std::shared_ptr<StreamState>& state() const { return state_; }
    int lane() const { return lane_; }
    // Rethrows (once) the first exception of a host task of this stream.
    void rethrow() { state_->rethrow(); }

  private:
    std::string name_;
    int ordinal_;
    int lane_ = 0;
    cudaStream_t stream_ = nullptr;
    std::shared_ptr<StreamState> state_ = std::make_shared<StreamState>();
    std::shared_ptr<Registry> reg_;
    std::unique_ptr<kernels::Scratch> scratch_;
};

// Live streams of one device, for synchronize() (host-task errors are kept per stream).
struct Registry {
    std::mutex mu;
    std::vector<CudaStream*> streams;
};

CudaStream::CudaStream(std::string name, int ordinal, core::Trace* trace,
                       std::shared_ptr<Registry> reg)
    : name_(std::move(name)), ordinal_(ordinal), reg_(std::move(reg)) {
    SOF_CHECK_CUDA(cudaSetDevice(ordinal_));
    SOF_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const int ord = ordinal_;
    const cudaStream_t st = stream_;
    kernels::Scratch::Memory mem;
    mem.alloc = [ord](size_t bytes) {
        SOF_CHECK_CUDA(cudaSetDevice(ord));
        void* p = nullptr;
        SOF_CHECK_CUDA(cudaMalloc(&p, bytes));
        return p;
    };
    mem.free = [ord](void* p) {
        cudaSetDevice(ord);
        cudaFree(p);
    };
    mem.drain = [st] { SOF_CHECK_CUDA(cudaStreamSynchronize(st)); };
    scratch_ =
        std::make_unique<kernels::Scratch>(std::move(mem), "kernel scratch (stream " + name_ + ")");
    if (trace) lane_ = trace->lane("stream " + name_);
    std::lock_guard<std::mutex> lk(reg_->mu);
    reg_->streams.push_back(this);
}

CudaStream::~CudaStream() {
    {
        std::lock_guard<std::mutex> lk(reg_->mu);
        for (size_t i = 0; i < reg_->streams.size(); i++)
            if (reg_->streams[i] == this) {
                reg_->streams.erase(reg_->streams.begin() + static_cast<long>(i));
                break;
            }
    }
    cudaSetDevice(ordinal_);
    scratch_.reset();               // drains the stream, then frees
    cudaStreamSynchronize(stream_); // pending host tasks hold only shared state, but finish them
    cudaStreamDestroy(stream_);
    (void)cudaGetLastError(); // nothing to report it to; not blamed on the next launch
}

// One host task in flight: owned by the callback, which deletes it.
struct HostTask {
    std::function<void()> fn;
    std::shared_ptr<StreamState> state;
    core::Trace* trace;
    int lane;
    std::string name;
};

void CUDART_CB run_host_task(void* arg) {
    HostTask* t = static_cast<HostTask*>(arg);
    double t0 = t->trace ? t->trace->now_us() : 0.0;
    try {
        t->fn();
    } catch (...) {
        std::lock_guard<std::mutex> lk(t->state->mu);
        if (!t->state->error) t->state->error = std::current_exception();
    }
    if (t->trace) {
        try {
            t->trace->span(t->lane, t->name, t0, t->trace->now_us(), "device");
        } catch (...) { // a failed trace record must not escape into the CUDA driver
        }
    }
    delete t;
}

CudaStream& cuda_stream(Stream& s) {
    return static_cast<CudaStream&>(s);
}
CudaEvent& cuda_event(Event& e) {
    return static_cast<CudaEvent&>(e);
}

// ---- the device ----

class CudaDevice : public Device {
  public:
    CudaDevice(int ordinal, double memory_gb, core::Trace* trace);
    ~CudaDevice() override;

    Kind kind() const override { return Kind::Cuda; }
    int ordinal() const override { return ordinal_; }
    std::string describe() const override { return describe_; }
    bool host_accessible() const override { return false; }

    void* alloc(size_t bytes, const std::string& what) override;
    void free(void* p) noexcept override;
    size_t capacity() const override { return capacity_; }
    size_t used() const override {
        std::lock_guard<std::mutex> lk(mu_);
        return used_;
    }
    size_t peak() const override {
        std::lock_guard<std::mutex> lk(mu_);
        return peak_;
    }
    void* alloc_pinned(size_t bytes, const std::string& what) override;
    void free_pinned(void* p) noexcept override;

    std::unique_ptr<Stream> create_stream(const std::string& name) override {
        return std::make_unique<CudaStream>(name, ordinal_, trace_, registry_);
    }
    std::unique_ptr<Event> create_event() override {
        return std::make_unique<CudaEvent>(ordinal_, false);
    }
    std::unique_ptr<Event> create_timing_event() override {
        return std::make_unique<CudaEvent>(ordinal_, true);
    }
    void record(Event& e, Stream& s) override {
        set_device();
        SOF_CHECK_CUDA(cudaEventRecord(cuda_event(e).handle(), cuda_stream(s).handle()));
        cuda_event(e).recorded = true;
    }
    double elapsed_ms(Event& start, Event& end) override {
        CudaEvent &a = cuda_event(start), &b = cuda_event(end);
        SOF_CHECK(a.timing() && b.timing(),
                  "elapsed_ms: an event was made by create_event(), not create_timing_event()");
        SOF_CHECK(a.recorded && b.recorded, "elapsed_ms: an event was never recorded");
        set_device();
        SOF_CHECK_CUDA(cudaEventSynchronize(a.handle()));
        SOF_CHECK_CUDA(cudaEventSynchronize(b.handle()));
        float ms = 0.0f;
        SOF_CHECK_CUDA(cudaEventElapsedTime(&ms, a.handle(), b.handle()));
        return static_cast<double>(ms);
    }
    void wait(Stream& s, Event& e) override {
        set_device();
        SOF_CHECK_CUDA(cudaStreamWaitEvent(cuda_stream(s).handle(), cuda_event(e).handle(), 0));
    }
    void synchronize(Stream& s) override {
        set_device();
        SOF_CHECK_CUDA(cudaStreamSynchronize(cuda_stream(s).handle()));
        cuda_stream(s).rethrow();
    }
    void synchronize() override;

    void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream& s) override;
    void memset(void* dst, int value, size_t bytes, Stream& s) override {
        if (bytes == 0) return;
        set_device();
        SOF_CHECK_CUDA(cudaMemsetAsync(dst, value, bytes, cuda_stream(s).handle()));
        sync_check(cuda_stream(s).handle(), "memset on stream", s.name());
    }
    void host_task(Stream& s, std::function<void()> fn, const std::string& name) override;

    void launch(Stream& s, const std::string& name,
                std::function<void(const kernels::Exec&)> op) override {
        set_device();
        kernels::Exec ex;
        ex.backend = kernels::Backend::Cuda;
        ex.stream = s.native();
        ex.scratch = cuda_stream(s).scratch();
        op(ex);
        sync_check(cuda_stream(s).handle(), "op", name);
    }

  private:
    void set_device() const { SOF_CHECK_CUDA(cudaSetDevice(ordinal_)); }

    int ordinal_;
    core::Trace* trace_;
    std::string describe_;
    size_t capacity_ = 0;
    int sms_ = 1;
    mutable std::mutex mu_;
    std::unordered_map<void*, size_t> allocs_; // device ptr -> bytes (rounded)
    std::unordered_map<void*, std::string> names_;
    std::unordered_map<void*, size_t> pinned_;
    size_t used_ = 0, peak_ = 0;
    std::shared_ptr<Registry> registry_ = std::make_shared<Registry>();
};

CudaDevice::CudaDevice(int ordinal, double memory_gb, core::Trace* trace)
    : ordinal_(ordinal), trace_(trace) {
    set_device();
    // host waits (event and stream synchronize) sleep instead of spinning: the main thread, the
    // comm lane and the optimizer worker would otherwise each hold a Grace core that the CPU
    // Adam's threads need (cudaDeviceScheduleAuto spins while contexts <= cores). The flags of
    // the current device, i.e. ours (CUDA 12 and later overwrite those of an initialized device;
    // older runtimes refuse: the error is cleared and the default stays).
    if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) (void)cudaGetLastError();
    cudaDeviceProp prop{};
    SOF_CHECK_CUDA(cudaGetDeviceProperties(&prop, ordinal_));
    sms_ = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    // stream-ordered memory pools (cudaMallocAsync) are missing on some sandboxed machines: no op
    // relies on them (kernels::Scratch), the log line says whether they are there
    int pools = 0;
    if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal_) != cudaSuccess) {
        (void)cudaGetLastError();
        pools = 0;
    }
    capacity_ = prop.totalGlobalMem;
    if (memory_gb > 0.0) {
        auto limit = static_cast<size_t>(memory_gb * double(size_t(1) << 30));
        if (limit < capacity_) capacity_ = limit;
    }
    // what the context and any other process already hold: the accounting counts from the total,
    // so a plan that fills it to the last byte fails in cudaMalloc instead (said here)
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        free_b = 0;
    }
    describe_ = core::strfmt(
        "cuda device %d: %s (sm_%d%d, %d SMs, %s, %s free at start; accounting limit %s; memory "
        "pools %s)",
        ordinal_, prop.name, prop.major, prop.minor, sms_,
        format_bytes(static_cast<double>(prop.totalGlobalMem)).c_str(),
        format_bytes(static_cast<double>(free_b)).c_str(),
        format_bytes(static_cast<double>(capacity_)).c_str(), pools ? "yes" : "no (not needed)");
}

CudaDevice::~CudaDevice() {
    cudaSetDevice(ordinal_);
    cudaDeviceSynchronize();
    for (auto& kv : allocs_)
        cudaFree(kv.first);
    for (auto& kv : pinned_)
        cudaFreeHost(kv.first);
    cudaGetLastError();
}

void* CudaDevice::alloc(size_t bytes, const std::string& what) {
    size_t r = round_up(bytes);
    std::lock_guard<std::mutex> lk(mu_);
    auto exhausted = [&](const std::string& why) {
        std::string biggest = "none";
        size_t big = 0;
        for (auto& kv : allocs_)
            if (kv.second > big) {
                big = kv.second;
                biggest = names_[kv.first] + " " + format_bytes(static_cast<double>(big));
            }
        SOF_FAIL(Runtime,
                 "device memory exhausted: cannot allocate %s for %s on CUDA device %d: %s (%s in "
                 "use of %s capacity; largest buffer: %s). Shrink what lives on the device "
                 "(offload.weights: flow, fewer offload.gpu_tail_buckets, smaller "
                 "offload.bucket_mb), or raise device.memory_gb if it limits the capacity",
                 format_bytes(static_cast<double>(bytes)).c_str(), what.c_str(), ordinal_,
                 why.c_str(), format_bytes(static_cast<double>(used_)).c_str(),
                 format_bytes(static_cast<double>(capacity_)).c_str(), biggest.c_str());
    };
    if (used_ + r > capacity_)
        exhausted(core::strfmt("%s free under the accounting limit",
                               format_bytes(static_cast<double>(capacity_ - used_)).c_str()));
    set_device();
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, r);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        exhausted(core::strfmt("cudaMalloc failed with %s free of %s on the GPU",
                               format_bytes(static_cast<double>(free_b)).c_str(),
                               format_bytes(static_cast<double>(total_b)).c_str()));
    }
    SOF_CHECK_CUDA_STATUS(
        e, core::strfmt("cudaMalloc(%zu bytes for %s) on device %d", r, what.c_str(), ordinal_)
               .c_str());
    allocs_[p] = r;
    names_[p] = what;
    used_ += r;
    if (used_ > peak_) peak_ = used_;
    return p;
}

void CudaDevice::free(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = allocs_.find(p);
    if (it == allocs_.end()) return;
    used_ -= it->second;
    allocs_.erase(it);
    names_.erase(p);
    cudaSetDevice(ordinal_);
    cudaFree(p); // waits for work using p
}

void* CudaDevice::alloc_pinned(size_t bytes, const std::string& what) {
    size_t r = round_up(bytes);
    set_device();
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, r, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        SOF_FAIL(Runtime,
                 "cannot allocate %s of pinned host memory for %s (cudaHostAlloc: %s): reduce "
                 "what is offloaded or raise the locked-memory limit (ulimit -l)",
                 format_bytes(static_cast<double>(bytes)).c_str(), what.c_str(),
                 cudaGetErrorString(e));
    }
    std::lock_guard<std::mutex> lk(mu_);
    pinned_[p] = r;
    return p;
}

void CudaDevice::free_pinned(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = pinned_.find(p);
    if (it == pinned_.end()) return;
    pinned_.erase(it);
    cudaFreeHost(p);
}

void CudaDevice::synchronize() {
    set_device();
    SOF_CHECK_CUDA(cudaDeviceSynchronize());
    // the streams' shared error states, not the streams: one may be destroyed by another thread
    // once the registry's lock is released
    std::vector<std::shared_ptr<StreamState>> all;
    {
        std::lock_guard<std::mutex> lk(registry_->mu);
        for (CudaStream* s : registry_->streams)
            all.push_back(s->state());
    }
    for (const std::shared_ptr<StreamState>& st : all)
        st->rethrow();
}

// The direction only names the copy: with unified addressing cudaMemcpyDefault follows the
// pointers (in weight flow the model grads are pinned host memory that device streams read).
void CudaDevice::copy(void* dst, const void* src, size_t bytes, CopyKind, Stream& s) {
    if (bytes == 0) return;
    set_device();
    SOF_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_stream(s).handle()));
    sync_check(cuda_stream(s).handle(), "copy on stream", s.name());
}

void CudaDevice::host_task(Stream& s, std::function<void()> fn, const std::string& name) {
    CudaStream& cs = cuda_stream(s);
    auto* t = new HostTask{std::move(fn), cs.state(), trace_, cs.lane(), name};
    set_device();
    const cudaError_t e = cudaLaunchHostFunc(cs.handle(), run_host_task, t);
    if (e != cudaSuccess) delete t;
    SOF_CHECK_CUDA_STATUS(e, "cudaLaunchHostFunc(cs.handle(), run_host_task, t)");
}

} // namespace

int cuda_device_count() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

std::unique_ptr<Device> make_cuda_device(const config::DeviceConfig& cfg, int local_rank,
                                         core::Trace* trace) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    // Runtime, not Config: what a node's driver shows may differ from rank to rank (one bad
    // node), so the rank that sees it aborts the job (fatal_one) instead of leaving alone
    if (e != cudaSuccess || count <= 0) {
        cudaGetLastError();
        SOF_FAIL(Runtime,
                 "device.type: cuda, but no CUDA device is usable (%s): check the driver and "
                 "CUDA_VISIBLE_DEVICES, or set device.type: host",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices visible");
    }
    int id = cfg.id >= 0 ? cfg.id : (local_rank >= 0 ? local_rank : 0) % count;
    if (id >= count)
        SOF_FAIL(Runtime, "device.id = %d, but only %d CUDA device(s) are visible (ids 0..%d)", id,
                 count, count - 1);
    return std::make_unique<CudaDevice>(id, cfg.memory_gb, trace);
}

} // namespace sof::device
