// gpu_adam plugin: fused multi-tensor AdamW/Adam on CUDA behind the sof_optim_abi.h C ABI.
// Host side: argument checks, per-slice constants, slice tables, launches on the caller's stream.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "core/cuda_sync.h"
#include "gpu_adam_kernels.cuh"
#include "optim/adam_ref.h"
#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"

namespace sof::gpu_adam {
namespace {

static_assert(sizeof(ResultOut) == sizeof(sof_adam_result), "result layout");
static_assert(offsetof(ResultOut, nonfinite) == offsetof(sof_adam_result, nonfinite), "layout");

// Device scratch of one stream for the statistics (kMaxBlocks per-block partials, then the result
// when it must be copied back): allocated on the first statistics launch on that stream, reused
// in its order, never on the hot path again (no stream-ordered pools: some machines lack them).
// `done` is recorded after each use and waited for before the next, so a stream handle reused
// after cudaStreamDestroy still waits for the old stream's last use.
struct StreamScratch {
    cudaStream_t stream = nullptr;
    void* mem = nullptr;
    cudaEvent_t done = nullptr;
};
constexpr size_t kScratchBytes = kMaxBlocks * sizeof(Partial) + sizeof(ResultOut);

struct Ctx {
    int device = 0;
    int grid = kMaxBlocks; // blocks per launch: one wave of resident blocks on this device
    std::mutex mu;
    std::string error; // last failure message
    // one launch sequence at a time: a stream's scratch is reused in stream order
    std::mutex launch_mu;
    std::vector<StreamScratch> scratch; // (streams that ran statistics)
};

sof_status fail(Ctx* ctx, sof_status st, const std::string& msg) {
    if (ctx) {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->error = "gpu_adam: " + msg;
    }
    return st;
}

sof_status cuda_fail(Ctx* ctx, cudaError_t e, const char* what) {
    return fail(ctx, e == cudaErrorMemoryAllocation ? SOF_ERR_OUT_OF_MEMORY : SOF_ERR_DEVICE,
                std::string(what) + " failed: " + cudaGetErrorName(e) + ": " +
                    cudaGetErrorString(e));
}

bool aligned_to(const void* p, uintptr_t a) {
    return (reinterpret_cast<uintptr_t>(p) % a) == 0;
}

// Checks one slice + hparams and fills its descriptor. `need_state` = false for grad stats.
sof_status make_desc(Ctx* ctx, const sof_adam_slice* s, const sof_adam_hparams* hp, int index,
                     SliceDesc* d) {
    std::string why;
    if (sof_status st = optim::check_adam_slice(s, hp, index, &why); st != SOF_OK)
        return fail(ctx, st, why);

    optim::AdamConsts k = optim::adam_consts(*hp); // the reference's constants, bit for bit
    d->p = s->param;
    d->g = s->grad;
    d->m = s->exp_avg;
    d->v = s->exp_avg_sq;
    d->p_out = s->param_out;
    d->m_out = s->exp_avg_out;
    d->v_out = s->exp_avg_sq_out;
    d->lowp = s->lowp_out;
    d->n = s->n;
    d->scale = k.scale;
    d->b1 = k.b1;
    d->b2 = k.b2;
    d->omb1 = k.omb1;
    d->omb2 = k.omb2;
    d->eps = k.eps;
    d->wd = k.wd;
    d->decay = k.decay;
    d->step_size = k.step_size;
    d->bc2_sqrt = k.bc2_sqrt;
    d->gdt = s->grad_dtype;
    d->ldt = s->lowp_out ? s->lowp_dtype : kNoLowp;
    d->l2 = k.l2 ? 1 : 0;
    d->sdt = s->state_dtype;
    uintptr_t ga = s->grad_dtype == SOF_DTYPE_F32 ? 16 : 8;
    uintptr_t sa = s->state_dtype == SOF_DTYPE_F32 ? 16 : 8;
    d->aligned = aligned_to(s->param, 16) && aligned_to(s->exp_avg, sa) &&
                 aligned_to(s->exp_avg_sq, sa) && aligned_to(s->param_out, 16) &&
                 aligned_to(s->exp_avg_out, sa) && aligned_to(s->exp_avg_sq_out, sa) &&
                 aligned_to(s->grad, ga) && (!s->lowp_out || aligned_to(s->lowp_out, 8));
    return SOF_OK;
}

int64_t chunks_of(int64_t n) {
    return (n + kChunk - 1) / kChunk;
}

// One launch of `op` over descs[first, last) with a table of capacity Cap; *blocks = grid used.
template <int Cap>
cudaError_t launch_group(Ctx* ctx, Op op, const std::vector<SliceDesc>& descs, size_t first,
                         size_t last, Partial* partials, cudaStream_t stream, int* blocks) {
    SliceTable<Cap> t;
    std::memset(&t, 0, sizeof(t));
    t.count = static_cast<int32_t>(last - first);
    int64_t total = 0;
    for (size_t i = first; i < last; i++) {
        t.chunk_start[i - first] = total;
        t.s[i - first] = descs[i];
        total += chunks_of(descs[i].n);
    }
    t.chunk_start[t.count] = total;
    *blocks = static_cast<int>(std::min<int64_t>(total, ctx->grid));
    if (*blocks == 0) return cudaSuccess;
    if (op == Op::Step)
        multi_kernel<Op::Step, Cap><<<*blocks, kThreads, 0, stream>>>(t, total, partials);
    else if (op == Op::Rollback)
        multi_kernel<Op::Rollback, Cap><<<*blocks, kThreads, 0, stream>>>(t, total, partials);
    else
        multi_kernel<Op::Stats, Cap><<<*blocks, kThreads, 0, stream>>>(t, total, partials);
    return cudaGetLastError();
}

// The scratch of `stream` (ctx->launch_mu held), allocated on first use; its index in *slot.
sof_status stream_scratch(Ctx* ctx, cudaStream_t stream, size_t* slot) {
    for (size_t i = 0; i < ctx->scratch.size(); i++)
        if (ctx->scratch[i].stream == stream) {
            *slot = i;
            return SOF_OK;
        }
    StreamScratch s;
    s.stream = stream;
    cudaError_t e = cudaMalloc(&s.mem, kScratchBytes);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaMalloc(statistics scratch)");
    e = cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        cudaFree(s.mem);
        return cuda_fail(ctx, e, "cudaEventCreateWithFlags(scratch)");
    }
    ctx->scratch.push_back(s);
    *slot = ctx->scratch.size() - 1;
    return SOF_OK;
}

// With SOF_CUDA_SYNC=1 (core/cuda_sync.h): the stream synchronized after a launch, a failure named.
sof_status sync_check(Ctx* ctx, cudaStream_t stream, Op op) {
    if (!core::cuda_sync_mode()) return SOF_OK;
    const cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) return SOF_OK;
    const char* name = op == Op::Step ? "adam step" : (op == Op::Rollback ? "rollback" : "stats");
    return cuda_fail(ctx, e,
                     (std::string(name) + " kernels (SOF_CUDA_SYNC: stream synchronized)").c_str());
}

// Runs `op` over descriptors in groups of kMaxSlices (one launch each) on `stream`; the
// statistics of all groups go to `result` (device-accessible) unless it is null.
sof_status launch(Ctx* ctx, Op op, const std::vector<SliceDesc>& descs, sof_adam_result* result,
                  cudaStream_t stream) {
    std::lock_guard<std::mutex> launch_lock(ctx->launch_mu);
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaSetDevice");
    bool stats = op != Op::Rollback && result != nullptr;

    // A result in plain (unregistered) host memory is not device-accessible everywhere: reduce
    // into device scratch and copy it back (that copy is synchronous for pageable memory).
    ResultOut* out = reinterpret_cast<ResultOut*>(result);
    bool copy_back = false;
    if (stats) {
        cudaPointerAttributes attr{};
        e = cudaPointerGetAttributes(&attr, result);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaPointerGetAttributes(result)");
        copy_back = attr.type == cudaMemoryTypeUnregistered;
    }
    void* scratch = nullptr;
    cudaEvent_t scratch_done = nullptr;
    if (stats) {
        size_t slot = 0;
        if (sof_status st = stream_scratch(ctx, stream, &slot); st != SOF_OK) return st;
        scratch = ctx->scratch[slot].mem;
        scratch_done = ctx->scratch[slot].done;
        e = cudaStreamWaitEvent(stream, scratch_done, 0); // its last use (no-op on this stream)
        if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaStreamWaitEvent(scratch)");
        if (copy_back)
            out = reinterpret_cast<ResultOut*>(static_cast<Partial*>(scratch) + kMaxBlocks);
    }
    Partial* partials = static_cast<Partial*>(scratch);

    size_t group_count = descs.empty() ? 1 : (descs.size() + kMaxSlices - 1) / kMaxSlices;
    for (size_t grp = 0; grp < group_count && e == cudaSuccess; grp++) {
        size_t first = grp * kMaxSlices;
        size_t last = std::min(descs.size(), first + kMaxSlices);
        size_t count = last - first;
        int blocks = 0;
        Partial* part = stats ? partials : nullptr;
        if (count <= 1)
            e = launch_group<1>(ctx, op, descs, first, last, part, stream, &blocks);
        else if (count <= 8)
            e = launch_group<8>(ctx, op, descs, first, last, part, stream, &blocks);
        else
            e = launch_group<kMaxSlices>(ctx, op, descs, first, last, part, stream, &blocks);
        if (e == cudaSuccess && stats) {
            finalize_kernel<<<1, kThreads, 0, stream>>>(partials, blocks, out, grp > 0 ? 1 : 0);
            e = cudaGetLastError();
        }
    }
    if (e != cudaSuccess) return cuda_fail(ctx, e, "kernel launch");
    if (copy_back) {
        e = cudaMemcpyAsync(result, out, sizeof(ResultOut), cudaMemcpyDeviceToHost, stream);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaMemcpyAsync(result)");
    }
    if (scratch_done) {
        e = cudaEventRecord(scratch_done, stream);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaEventRecord(scratch)");
    }
    if (copy_back) {
        e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaStreamSynchronize");
    }
    return sync_check(ctx, stream, op);
}

// ---- ABI entry points ----

int32_t score() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        cudaGetLastError(); // clear this thread's last-error state
        return 0;
    }
    // The kernels are built for one architecture list; 0 if none of them loads on device 0.
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, multi_kernel<Op::Step, 1>) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return 100;
}

const char* variant() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        cudaGetLastError();
        return "cuda (no device)";
    }
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    switch (major * 10 + minor) {
    case 80:
        return "sm_80";
    case 86:
        return "sm_86";
    case 89:
        return "sm_89";
    case 90:
        return "sm_90";
    case 100:
        return "sm_100";
    case 120:
        return "sm_120";
    default:
        return "cuda";
    }
}

sof_status create(const sof_optim_init* init, sof_optim_ctx** out) {
    if (!init || !out || init->struct_size < sizeof(sof_optim_init))
        return SOF_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || init->device < 0 || init->device >= count) {
        cudaGetLastError();
        return SOF_ERR_DEVICE;
    }
    Ctx* ctx = new (std::nothrow) Ctx;
    if (!ctx) return SOF_ERR_OUT_OF_MEMORY;
    ctx->device = init->device;
    // One wave of resident blocks: grid-striding over chunks balances better than many waves.
    // The grid depends only on the device, so the statistics are reproducible run to run.
    int sms = 0, per_sm = 0;
    if (cudaSetDevice(init->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, init->device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, multi_kernel<Op::Step, 1>, kThreads,
                                                      0) != cudaSuccess) {
        cudaGetLastError();
        delete ctx;
        return SOF_ERR_DEVICE;
    }
    ctx->grid = std::max(1, std::min(kMaxBlocks, sms * per_sm));
    *out = reinterpret_cast<sof_optim_ctx*>(ctx);
    return SOF_OK;
}

void destroy(sof_optim_ctx* c) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return;
    cudaSetDevice(ctx->device);
    for (StreamScratch& s : ctx->scratch) {
        cudaEventSynchronize(s.done); // its last use has run
        cudaEventDestroy(s.done);
        cudaFree(s.mem);
    }
    cudaGetLastError();
    delete ctx;
}

const char* last_error(sof_optim_ctx* c) {
    thread_local std::string copy; // stable storage for the returned pointer, per thread
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return "gpu_adam: null context";
    std::lock_guard<std::mutex> lock(ctx->mu);
    copy = ctx->error;
    return copy.c_str();
}

sof_status step_multi(sof_optim_ctx* c, const sof_adam_slice* slices, const sof_adam_hparams* hp,
                      int32_t count, sof_adam_result* result, void* stream) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
    if (count < 0 || (count > 0 && (!slices || !hp)))
        return fail(ctx, SOF_ERR_INVALID_ARGUMENT, "adam_step_multi: bad slice list");
    std::vector<SliceDesc> descs(static_cast<size_t>(count));
    for (int32_t i = 0; i < count; i++) {
        sof_status st = make_desc(ctx, &slices[i], &hp[i], i, &descs[i]);
        if (st != SOF_OK) return st;
    }
    return launch(ctx, Op::Step, descs, result, static_cast<cudaStream_t>(stream));
}

sof_status step(sof_optim_ctx* c, const sof_adam_slice* slice, const sof_adam_hparams* hp,
                sof_adam_result* result, void* stream) {
    return step_multi(c, slice, hp, 1, result, stream);
}

sof_status rollback(sof_optim_ctx* c, const sof_adam_slice* slice, const sof_adam_hparams* hp,
                    void* stream) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
    std::string why;
    if (sof_status st = optim::check_adam_rollback(slice, hp, &why); st != SOF_OK)
        return fail(ctx, st, why);
    std::vector<SliceDesc> descs(1);
    sof_status st = make_desc(ctx, slice, hp, 0, &descs[0]);
    if (st != SOF_OK) return st;
    return launch(ctx, Op::Rollback, descs, nullptr, static_cast<cudaStream_t>(stream));
}

sof_status grad_stats(sof_optim_ctx* c, const void* grad, int32_t grad_dtype, int64_t n,
                      float scale, sof_adam_result* result, void* stream) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
    std::string why;
    if (sof_status st = optim::check_grad_stats(grad, grad_dtype, n, result, &why); st != SOF_OK)
        return fail(ctx, st, why);
    SliceDesc d{};
    d.g = grad;
    d.n = n;
    d.scale = scale;
    d.gdt = grad_dtype;
    d.ldt = kNoLowp;
    d.aligned = aligned_to(grad, grad_dtype == SOF_DTYPE_F32 ? 16 : 8);
    std::vector<SliceDesc> descs(1, d);
    return launch(ctx, Op::Stats, descs, result, static_cast<cudaStream_t>(stream));
}

const sof_optim_plugin kPlugin = {
    SOF_OPTIM_ABI_VERSION,
    sizeof(sof_optim_plugin),
    "gpu_adam",
    "fused multi-tensor AdamW/Adam CUDA kernel (fp32/bf16/fp16 grads, fp32/bf16 moments, "
    "bf16/fp16 copy, "
    "separate outputs, fixed-order fp64 grad statistics)",
    SOF_TARGET_CUDA,
    score,
    variant,
    create,
    destroy,
    last_error,
    step,
    step_multi,
    rollback,
    grad_stats,
};

} // namespace
} // namespace sof::gpu_adam

extern "C" __attribute__((visibility("default"))) const sof_optim_plugin*
sof_optim_plugin_get(void) {
    return &sof::gpu_adam::kPlugin;
}
