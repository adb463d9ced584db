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

#ifdef __USE_FAST_MATH__
#error "gpu_adam must match the scalar reference bit for bit: build it without -use_fast_math"
#endif
#include "gpu_adam_kernels.cuh"
#include "gpu_adam_q.cuh"
#include "optim/adam_ref.h"
#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"
#include "optim/sof_optim_shell.h"

namespace sof::gpu_adam {
namespace {

static_assert(sizeof(ResultOut) == sizeof(sof_optim_result), "result layout");
static_assert(offsetof(ResultOut, nonfinite) == offsetof(sof_optim_result, nonfinite), "layout");

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

struct Ctx : optim::shell::Base {
    int grid = kMaxBlocks;   // blocks per launch: one wave of resident blocks on this device
    int grid_q = kMaxBlocks; // the same for q_kernel (36 KiB of shared memory per block)
    // one launch sequence at a time: a stream's scratch is reused in stream order
    std::mutex launch_mu;
    std::vector<StreamScratch> scratch; // (streams that ran statistics)

    Ctx() = default;
    Ctx(const Ctx&) = delete;
    Ctx& operator=(const Ctx&) = delete;
    // The shell's destroy deletes the context: each scratch is freed after its last use has run.
    ~Ctx() {
        if (scratch.empty()) return;
        cudaSetDevice(device);
        for (StreamScratch& s : scratch) {
            cudaEventSynchronize(s.done);
            cudaEventDestroy(s.done);
            cudaFree(s.mem);
        }
        cudaGetLastError();
    }
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

// Fills the descriptor of one (checked) slice + hparams.
void make_desc(const sof_optim_slice* s, const sof_optim_hparams* hp, SliceDesc* d) {
    optim::AdamConsts k = optim::adam_consts(*hp); // the reference's constants, bit for bit
    const sof_state_slot& qm = s->slot[0];
    const sof_state_slot& qv = s->slot[1];
    d->p = static_cast<const float*>(s->param);
    d->g = s->grad;
    d->m = qm.data;
    d->v = qv.data;
    d->p_out = static_cast<float*>(s->param_out);
    d->m_out = qm.data_out;
    d->v_out = qv.data_out;
    d->pdt = s->param_dtype;
    d->qb = qm.format == SOF_STATE_Q8 ? qm.block : 0;
    d->chunk = d->qb > 0 ? d->qb * (kChunk / d->qb) : kChunk;
    d->ms = qm.scale;
    d->vs = qv.scale;
    d->mso = qm.scale_out;
    d->vso = qv.scale_out;
    d->seed = hp->seed;
    d->step = hp->step;
    d->index0 = s->index0;
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
    d->sdt = qm.format;
    uintptr_t ga = s->grad_dtype == SOF_DTYPE_F32 ? 16 : 8;
    uintptr_t sa = qm.format == SOF_STATE_F32 ? 16 : 8;
    d->aligned = aligned_to(s->param, 16) && aligned_to(qm.data, sa) && aligned_to(qv.data, sa) &&
                 aligned_to(s->param_out, 16) && aligned_to(qm.data_out, sa) &&
                 aligned_to(qv.data_out, sa) && aligned_to(s->grad, ga) &&
                 (!s->lowp_out || aligned_to(s->lowp_out, 8));
}

int64_t chunks_of(const SliceDesc& d) {
    const int64_t chunk = d.chunk > 0 ? d.chunk : kChunk;
    return (d.n + chunk - 1) / chunk;
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
        total += chunks_of(descs[i]);
    }
    t.chunk_start[t.count] = total;
    bool q = false;
    for (size_t i = first; i < last; i++)
        q = q || needs_q(descs[i]);
    q = q && op == Op::Step;
    *blocks = static_cast<int>(std::min<int64_t>(total, q ? ctx->grid_q : ctx->grid));
    if (*blocks == 0) return cudaSuccess;
    if (q)
        q_kernel<Cap><<<*blocks, kThreads, 0, stream>>>(t, total, partials);
    else if (op == Op::Step)
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
sof_status launch(Ctx* ctx, Op op, const std::vector<SliceDesc>& descs, sof_optim_result* result,
                  cudaStream_t stream) {
    std::lock_guard<std::mutex> launch_lock(ctx->launch_mu);
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaSetDevice");
    // the launches below read cudaGetLastError: an earlier (non-sticky) error of the caller's on
    // this thread would be reported as theirs
    (void)cudaGetLastError();
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

// ---- the shell's policy (optim/sof_optim_shell.h) ----

// The lowest architecture the kernels were built for (nvcc's __CUDA_ARCH_LIST__, e.g. 800,900;
// CMake embeds that architecture's PTX too, so newer devices load the kernels through the JIT).
constexpr int min_built_arch() {
#ifdef __CUDA_ARCH_LIST__
    constexpr int archs[] = {__CUDA_ARCH_LIST__};
    int lo = archs[0];
    for (int a : archs)
        lo = a < lo ? a : lo;
    return lo;
#else
    return 0;
#endif
}

// Device queries only, no CUDA context: score() runs on every rank's main thread before the rank
// picks its GPU (find_plugin lists every plugin), and a context made here would sit on GPU 0 of
// every rank for the whole run (an EXCLUSIVE_PROCESS GPU 0 would then refuse rank 0). Whether the
// kernels load is init's check, on the device the caller names.
int32_t cuda_score() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        cudaGetLastError(); // clear this thread's last-error state
        return 0;
    }
    for (int d = 0; d < count; d++) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) == cudaSuccess &&
            major * 100 + minor * 10 >= min_built_arch())
            return 100;
    }
    cudaGetLastError();
    return 0;
}

struct GpuAdam {
    static constexpr const char* kName = "gpu_adam";
    static constexpr const char* kDescription =
        "fused multi-tensor AdamW/Adam CUDA kernel (fp32/bf16/fp16 grads, fp32/bf16/q8 moments, "
        "fp32 or bf16 (stochastically rounded) master params, bf16/fp16 copy, separate outputs, "
        "fixed-order fp64 grad statistics)";
    static constexpr sof_target kTarget = SOF_TARGET_CUDA;
    static constexpr const char* kAlgorithm = "adam";
    static constexpr int32_t kNumSlots = optim::kAdamSlots;
    static constexpr uint32_t kStateFormats =
        (1u << SOF_STATE_F32) | (1u << SOF_STATE_BF16) | (1u << SOF_STATE_Q8);
    static constexpr uint32_t kParamDtypes = (1u << SOF_DTYPE_F32) | (1u << SOF_DTYPE_BF16);
    static const sof_slot_info* slots() { return optim::adam_slots(); }
    using Ctx = gpu_adam::Ctx;

    static int32_t score() { return cuda_score(); }

    static const char* variant() {
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

    static sof_status init(Ctx& ctx, const sof_optim_init& init, std::string*) {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess || init.device < 0 || init.device >= count) {
            cudaGetLastError();
            return SOF_ERR_DEVICE;
        }
        // One wave of resident blocks: grid-striding over chunks balances better than many
        // waves. The grid depends only on the device, so the statistics are reproducible. The
        // caller's current device is restored (the occupancy queries need ours current).
        int sms = 0, per_sm = 0, per_sm_q = 0, caller = 0;
        if (cudaGetDevice(&caller) != cudaSuccess) caller = -1;
        const bool ok = cudaSetDevice(init.device) == cudaSuccess &&
                        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, init.device) ==
                            cudaSuccess &&
                        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                            &per_sm, multi_kernel<Op::Step, 1>, kThreads, 0) == cudaSuccess &&
                        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_q, q_kernel<1>,
                                                                      kThreads, 0) == cudaSuccess;
        if (caller >= 0 && caller != init.device) cudaSetDevice(caller);
        if (!ok) { // the occupancy queries load the kernels: refused where they do not load
            cudaGetLastError();
            return SOF_ERR_DEVICE;
        }
        ctx.grid = std::max(1, std::min(kMaxBlocks, sms * per_sm));
        ctx.grid_q = std::max(1, std::min(kMaxBlocks, sms * per_sm_q));
        return SOF_OK;
    }

    static sof_status step(Ctx& ctx, const sof_optim_slice* slices, const sof_optim_hparams* hp,
                           int32_t count, sof_optim_result* result, void* stream) {
        std::vector<SliceDesc> descs(static_cast<size_t>(count));
        for (int32_t i = 0; i < count; i++)
            make_desc(&slices[i], &hp[i], &descs[i]);
        return launch(&ctx, Op::Step, descs, result, static_cast<cudaStream_t>(stream));
    }

    static sof_status rollback(Ctx& ctx, const sof_optim_slice& slice, const sof_optim_hparams& hp,
                               void* stream) {
        std::vector<SliceDesc> descs(1);
        make_desc(&slice, &hp, &descs[0]);
        return launch(&ctx, Op::Rollback, descs, nullptr, static_cast<cudaStream_t>(stream));
    }

    static sof_status grad_stats(Ctx& ctx, const void* grad, int32_t grad_dtype, int64_t n,
                                 float scale, sof_optim_result* result, void* stream) {
        SliceDesc d{};
        d.g = grad;
        d.n = n;
        d.scale = scale;
        d.gdt = grad_dtype;
        d.ldt = kNoLowp;
        d.chunk = kChunk;
        d.aligned = aligned_to(grad, grad_dtype == SOF_DTYPE_F32 ? 16 : 8);
        std::vector<SliceDesc> descs(1, d);
        return launch(&ctx, Op::Stats, descs, result, static_cast<cudaStream_t>(stream));
    }
};

} // namespace
} // namespace sof::gpu_adam

SOF_OPTIM_EXPORT_PLUGIN(sof::gpu_adam::GpuAdam)
