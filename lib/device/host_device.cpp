// Host device implementation (see host_device.h): each stream is one worker thread draining a
// FIFO of tasks; events are generation counters under a mutex; copies are memcpy on the stream.
#include "device/host_device.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/job_queue.h"
#include "core/strfmt.h"
#include "core/trace.h"

namespace sof::device {

namespace {

constexpr size_t kAlign = 256;

size_t round_up(size_t n) {
    return n == 0 ? kAlign : (n + kAlign - 1) / kAlign * kAlign;
}

class HostEvent : public Event {
  public:
    explicit HostEvent(bool timing) : timing_(timing) {}
    bool timing() const override { return timing_; }
    // Called by record(): the generation this record will complete.
    uint64_t next_generation() {
        std::lock_guard<std::mutex> lk(mu_);
        return ++recorded_;
    }
    uint64_t recorded() {
        std::lock_guard<std::mutex> lk(mu_);
        return recorded_;
    }
    // Runs on the stream's thread when the stream reaches the record: a timing event reads the
    // steady clock there, so the time between two events is the stream's time between them.
    void complete(uint64_t gen) {
        const auto now =
            timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (gen > completed_) {
                completed_ = gen;
                at_ = now;
            }
        }
        cv_.notify_all();
    }
    // The time of the most recent record (waits for it); throws when never recorded.
    std::chrono::steady_clock::time_point time() {
        std::unique_lock<std::mutex> lk(mu_);
        SOF_CHECK(timing_, "elapsed_ms: the event was made by create_event(), not "
                           "create_timing_event()");
        SOF_CHECK(recorded_ > 0, "elapsed_ms: the event was never recorded");
        const uint64_t gen = recorded_;
        cv_.wait(lk, [&] { return completed_ >= gen; });
        return at_;
    }
    void wait_for(uint64_t gen) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return completed_ >= gen; });
    }
    bool query() override {
        std::lock_guard<std::mutex> lk(mu_);
        return completed_ >= recorded_;
    }
    void synchronize() override { wait_for(recorded()); }

  private:
    const bool timing_;
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t recorded_ = 0, completed_ = 0;
    std::chrono::steady_clock::time_point at_{}; // when completed_ was reached (timing events)
};

} // namespace

class HostStream : public Stream {
  public:
    HostStream(std::string name, core::Trace* trace, std::shared_ptr<HostDevice::Registry> reg);
    ~HostStream() override;
    const std::string& name() const override { return name_; }
    void* native() const override { return nullptr; }

    // Enqueue fn; `label` non-empty = traced span on this stream's lane.
    void push(std::function<void()> fn, std::string label) {
        queue_.submit(std::move(fn), std::move(label));
    }
    // Wait until everything enqueued so far has run; rethrows the first task exception.
    void drain() { queue_.drain(); }

  private:
    std::string name_;
    std::shared_ptr<HostDevice::Registry> reg_;
    core::JobQueue queue_; // the stream's worker thread (a failed task does not stop later ones)
};

struct HostDevice::Registry {
    std::mutex mu;
    std::vector<HostStream*> streams;
};

HostStream::HostStream(std::string name, core::Trace* trace,
                       std::shared_ptr<HostDevice::Registry> reg)
    : name_(std::move(name)), reg_(std::move(reg)),
      queue_(core::JobQueue::OnError::Continue, trace, "stream " + name_, "device") {
    std::lock_guard<std::mutex> lk(reg_->mu);
    reg_->streams.push_back(this);
}

HostStream::~HostStream() {
    std::lock_guard<std::mutex> lk(reg_->mu);
    for (size_t i = 0; i < reg_->streams.size(); i++)
        if (reg_->streams[i] == this) {
            reg_->streams.erase(reg_->streams.begin() + static_cast<long>(i));
            break;
        }
    // queue_ then runs what is queued and joins its thread
}

static HostStream& host_stream(Stream& s) {
    return static_cast<HostStream&>(s);
}
static HostEvent& host_event(Event& e) {
    return static_cast<HostEvent&>(e);
}

HostDevice::HostDevice(size_t capacity_bytes, core::Trace* trace)
    : capacity_(capacity_bytes), trace_(trace), registry_(std::make_shared<Registry>()) {}

HostDevice::~HostDevice() {
    for (auto& kv : device_allocs_)
        std::free(kv.first);
    for (auto& kv : pinned_allocs_)
        std::free(kv.first);
}

std::string HostDevice::describe() const {
    return core::strfmt("host device (emulated accelerator: %s arena, streams = threads)",
                        format_bytes(static_cast<double>(capacity_)).c_str());
}

void* HostDevice::alloc(size_t bytes, const std::string& what) {
    size_t r = round_up(bytes);
    std::lock_guard<std::mutex> lk(mu_);
    if (used_ + r > capacity_) {
        std::string biggest = "none";
        size_t big = 0;
        for (auto& kv : device_allocs_)
            if (kv.second > big) {
                big = kv.second;
                biggest = device_names_[kv.first] + " " + format_bytes(static_cast<double>(big));
            }
        std::string need = format_bytes(static_cast<double>(bytes));
        std::string avail = format_bytes(static_cast<double>(capacity_ - used_));
        std::string cap = format_bytes(static_cast<double>(capacity_));
        std::string in_use = format_bytes(static_cast<double>(used_));
        SOF_FAIL(Runtime,
                 "device memory exhausted: cannot allocate %s for %s on the host device: %s free "
                 "of %s capacity (%s in use; largest buffer: %s). Raise device.memory_gb in the "
                 "deck (now %.4g GiB), or shrink what lives on the device (offload.weights: flow, "
                 "fewer offload.gpu_tail_buckets, smaller offload.bucket_mb)",
                 need.c_str(), what.c_str(), avail.c_str(), cap.c_str(), in_use.c_str(),
                 biggest.c_str(), static_cast<double>(capacity_) / double(1ull << 30));
    }
    void* p = std::aligned_alloc(kAlign, r);
    if (!p)
        SOF_FAIL(Runtime, "host memory exhausted allocating %s for %s (host device arena)",
                 format_bytes(static_cast<double>(bytes)).c_str(), what.c_str());
    device_allocs_[p] = r;
    device_names_[p] = what;
    used_ += r;
    if (used_ > peak_) peak_ = used_;
    return p;
}

void HostDevice::free(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = device_allocs_.find(p);
    if (it == device_allocs_.end()) return;
    used_ -= it->second;
    device_allocs_.erase(it);
    device_names_.erase(p);
    std::free(p);
}

size_t HostDevice::used() const {
    std::lock_guard<std::mutex> lk(mu_);
    return used_;
}

size_t HostDevice::peak() const {
    std::lock_guard<std::mutex> lk(mu_);
    return peak_;
}

void* HostDevice::alloc_pinned(size_t bytes, const std::string& what) {
    size_t r = round_up(bytes);
    void* p = std::aligned_alloc(kAlign, r);
    if (!p)
        SOF_FAIL(Runtime, "host memory exhausted allocating %s of pinned memory for %s",
                 format_bytes(static_cast<double>(bytes)).c_str(), what.c_str());
    std::lock_guard<std::mutex> lk(mu_);
    pinned_allocs_[p] = r;
    return p;
}

size_t HostDevice::pinned_used() const {
    std::lock_guard<std::mutex> lk(mu_);
    size_t n = 0;
    for (const auto& kv : pinned_allocs_)
        n += kv.second;
    return n;
}

void HostDevice::free_pinned(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = pinned_allocs_.find(p);
    if (it == pinned_allocs_.end()) return;
    pinned_allocs_.erase(it);
    std::free(p);
}

std::unique_ptr<Stream> HostDevice::create_stream(const std::string& name) {
    return std::make_unique<HostStream>(name, trace_, registry_);
}

std::unique_ptr<Event> HostDevice::create_event() {
    return std::make_unique<HostEvent>(false);
}

std::unique_ptr<Event> HostDevice::create_timing_event() {
    return std::make_unique<HostEvent>(true);
}

double HostDevice::elapsed_ms(Event& start, Event& end) {
    const auto a = host_event(start).time(), b = host_event(end).time();
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void HostDevice::record(Event& e, Stream& s) {
    HostEvent* ev = &host_event(e);
    uint64_t gen = ev->next_generation();
    host_stream(s).push([ev, gen] { ev->complete(gen); }, std::string());
}

void HostDevice::wait(Stream& s, Event& e) {
    HostEvent* ev = &host_event(e);
    uint64_t gen = ev->recorded();
    if (gen == 0) return;
    host_stream(s).push([ev, gen] { ev->wait_for(gen); }, std::string());
}

void HostDevice::synchronize(Stream& s) {
    host_stream(s).drain();
}

void HostDevice::synchronize() {
    std::vector<HostStream*> all;
    {
        std::lock_guard<std::mutex> lk(registry_->mu);
        all = registry_->streams;
    }
    for (HostStream* s : all)
        s->drain();
}

void HostDevice::copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream& s) {
    const char* k =
        kind == CopyKind::HostToDevice ? "H2D" : (kind == CopyKind::DeviceToHost ? "D2H" : "D2D");
    host_stream(s).push([dst, src, bytes] { std::memcpy(dst, src, bytes); },
                        core::strfmt("%s %s", k, format_bytes(static_cast<double>(bytes)).c_str()));
}

void HostDevice::memset(void* dst, int value, size_t bytes, Stream& s) {
    host_stream(s).push([dst, value, bytes] { std::memset(dst, value, bytes); }, "memset");
}

void HostDevice::host_task(Stream& s, std::function<void()> fn, const std::string& name) {
    host_stream(s).push(std::move(fn), name);
}

// The op runs on the stream's worker thread, in stream order, with the CPU twins' Exec.
void HostDevice::launch(Stream& s, const std::string& name,
                        std::function<void(const kernels::Exec&)> op) {
    host_stream(s).push([op = std::move(op)] { op(kernels::cpu_exec()); }, name);
}

} // namespace sof::device
