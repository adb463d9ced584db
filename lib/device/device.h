// The accelerator interface, shaped after CUDA: device memory with capacity accounting, pinned
// host memory, streams (ordered queues), events, async copies, host work on a stream, and kernel
// launches on a stream (the ops live in lib/kernels). Implementations: host (host_device.cpp),
// cuda (cuda_device.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/exec.h"
#include "kernels/grad_stats.h"
#include "kernels/scratch.h"

namespace sof::config {
struct DeviceConfig;
}
namespace sof::core {
class Trace;
}

namespace sof::device {

enum class Kind { Host, Cuda };

// An ordered queue of device work (cudaStream_t on CUDA, a worker thread on the host device).
// Work enqueued on one stream runs in enqueue order; different streams run concurrently.
class Stream {
  public:
    virtual ~Stream() = default;
    virtual const std::string& name() const = 0;
    // The native handle handed to optimizer plugins (cudaStream_t; nullptr on the host device).
    virtual void* native() const = 0;
};

// A marker in a stream (cudaEvent_t semantics): record() captures all work enqueued on the
// stream so far; the event completes when that work has run. An event never recorded is complete.
class Event {
  public:
    virtual ~Event() = default;
    // True when the most recently recorded work has completed (non-blocking).
    virtual bool query() = 0;
    // Blocks the calling host thread until the most recently recorded work has completed.
    virtual void synchronize() = 0;
    // True for events made by create_timing_event() (they can be given to elapsed_ms).
    virtual bool timing() const = 0;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// Result of grad_prep for one piece, written into device memory (16 bytes; kernels/grad_stats.h).
using GradStats = kernels::GradStats;

class Device {
  public:
    virtual ~Device() = default;

    virtual Kind kind() const = 0;
    virtual int ordinal() const = 0;          // CUDA device id; 0 on the host device
    virtual std::string describe() const = 0; // one line for the log
    // True when host code may dereference device pointers (host device). The CPU model then
    // reads weights and writes grads in device memory directly; otherwise the engine stages.
    virtual bool host_accessible() const = 0;

    // --- memory -------------------------------------------------------------------------------
    // Device memory of `bytes` (256-byte aligned). `what` names the buffer for the error message:
    // over-allocation throws core::Error (Runtime) naming what did not fit, its size, the free
    // and total capacity, and the deck key to change (device.memory_gb).
    virtual void* alloc(size_t bytes, const std::string& what) = 0;
    virtual void free(void* p) noexcept = 0;
    virtual size_t capacity() const = 0; // bytes
    virtual size_t used() const = 0;     // bytes currently allocated
    virtual size_t peak() const = 0;     // high-water mark of used()
    // Page-locked host memory (cudaHostAlloc) for async copies; 256-byte aligned.
    virtual void* alloc_pinned(size_t bytes, const std::string& what) = 0;
    virtual void free_pinned(void* p) noexcept = 0;

    // --- streams and events -------------------------------------------------------------------
    virtual std::unique_ptr<Stream> create_stream(const std::string& name) = 0;
    virtual std::unique_ptr<Event> create_event() = 0;
    // An event that also takes the time at which the stream reaches it (cudaEventCreate with
    // timing; on the host device the steady clock read on the stream's thread when the record
    // runs). Plain events (create_event) skip that cost.
    virtual std::unique_ptr<Event> create_timing_event() = 0;
    virtual void record(Event& e, Stream& s) = 0; // cudaEventRecord
    virtual void wait(Stream& s, Event& e) = 0;   // cudaStreamWaitEvent (s waits, host not)
    virtual void synchronize(Stream& s) = 0;      // cudaStreamSynchronize
    virtual void synchronize() = 0;               // every stream of this device
    // Milliseconds between two recorded timing events (cudaEventElapsedTime): the device time
    // from the point `start` marks in its stream to the point `end` marks. Waits for both to
    // complete. Throws core::Error (Internal) when either is not a timing event or was never
    // recorded. On CUDA the resolution is about 0.5 us.
    virtual double elapsed_ms(Event& start, Event& end) = 0;

    // --- async work on a stream ---------------------------------------------------------------
    virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream& s) = 0;
    virtual void memset(void* dst, int value, size_t bytes, Stream& s) = 0;
    // Runs fn on a host thread once the stream's earlier work is done; later work waits for it
    // (cudaLaunchHostFunc). fn must not call into this device's stream API. Exceptions thrown
    // by fn are kept and rethrown by the next synchronize() of that stream or of the device.
    virtual void host_task(Stream& s, std::function<void()> fn, const std::string& name) = 0;

    // Runs a kernel op on the stream: op gets the Exec of this device for s. Host device: op runs
    // on the stream's worker thread with the CPU Exec once the earlier work is done (a host task;
    // its exceptions surface at the next synchronize, as host_task's do). CUDA device: sets the
    // device and calls op at once on the calling thread with Exec{Cuda, s.native(), scratch of s}
    // (op enqueues its kernels on the stream; errors throw here; with SOF_CUDA_SYNC=1 the stream
    // is synchronized after op and a failure names `name`). Exec::blas is null: matmul needs the
    // caller's kernels::cuda::Blas for the stream.
    virtual void launch(Stream& s, const std::string& name,
                        std::function<void(const kernels::Exec&)> op) = 0;

    // --- device ops: the kernels of kernels/grad_stats.h and kernels/cast.h through launch() --
    // Fused gradient preparation over grad (n fp32, device): for each piece i covering
    // [bounds[i], bounds[i+1]) (bounds: npieces+1 ascending offsets, bounds[0] = 0,
    // bounds.back() = n; checked here, throws Internal) writes stats[i] (device, npieces) = sum
    // of squares of g' and a non-finite flag, where g' = scale*g, rounded to bf16 when bf16_out
    // is non-null; g' is written to bf16_out (device, n) when given. Sums are fp64 in a fixed
    // order (kernels::piece_stats) so results do not depend on timing, threads or the device.
    // On CUDA the host bounds go to the device through the stream's scratch on every call: the
    // engine's hot path uses grad_prep_pieces with bounds uploaded once instead.
    void grad_prep(const float* grad, size_t n, std::vector<int64_t> bounds, float scale,
                   GradStats* stats, uint16_t* bf16_out, Stream& s);
    // The same with the piece bounds in device memory (uploaded once, checked on the host before:
    // kernels::check_piece_bounds): piece i covers grad[bounds[i] - base, bounds[i+1] - base) for
    // i < npieces (bounds: npieces+1 ascending int64, device; base = bounds[0] when the pieces are
    // a slice of a longer list, e.g. one fragment of a bucket of the whole model's bounds).
    void grad_prep_pieces(const float* grad, const int64_t* bounds, int64_t npieces, int64_t base,
                          float scale, GradStats* stats, uint16_t* bf16_out, Stream& s);
    // Round-to-nearest-even casts (NaN kept), device buffers of n elements.
    void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n, Stream& s);
    void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n, Stream& s);
    // out[i] = (((chunks[0][i] + chunks[1][i]) + chunks[2][i]) + ...) over `nchunks` consecutive
    // chunks of n elements (chunks: nchunks*n, device): the rank-order sum of a reduce-scatter,
    // bitwise the same as comm::Group's host sum. out may alias chunks (the first chunk).
    void sum_chunks(const float* chunks, int nchunks, size_t n, float* out, Stream& s);
};

// Creates the device chosen by cfg.type (auto: cuda when built with CUDA and a GPU is visible,
// else host). local_rank picks the GPU when cfg.id < 0. trace (may be null) gets one lane per
// stream of the host device. Throws core::Error (Config) when cuda is asked for but unavailable.
std::unique_ptr<Device> make_device(const config::DeviceConfig& cfg, int local_rank,
                                    core::Trace* trace);

// Why make_device would refuse cfg.type in this build before looking at any GPU ("" when it would
// not): device.type cuda in a build without CUDA. `check` asks it too (app/deck_checks.h).
std::string device_type_problem(const config::DeviceConfig& cfg);

// The CUDA device lives in device/cuda_device.{h,cu} (CUDA builds only) and must declare, in
// namespace sof::device:
//   std::unique_ptr<Device> make_cuda_device(const config::DeviceConfig& cfg, int local_rank,
//                                            core::Trace* trace);
//   int cuda_device_count(); // 0 when no GPU is visible (never throws)
// cuda_device.h must compile as plain C++ (no CUDA-only syntax); device.cpp includes it.

// Device scratch for the kernel ops enqueued on s (kernels/scratch.h), in d's accounted memory
// (`what` names it in allocation errors); nothing is allocated before reserve() or get(). d and s
// must outlive it: their owner resets it before destroying them.
std::unique_ptr<kernels::Scratch> make_scratch(Device& d, Stream& s, const std::string& what);

// Capacity of the host device for a deck value (device.memory_gb; 0 = 8 GiB), in bytes.
size_t host_capacity_bytes(double memory_gb);

// "12.0 MiB", "3.25 GiB"
std::string format_bytes(double bytes);

} // namespace sof::device
