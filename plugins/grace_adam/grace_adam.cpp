// grace_adam plugin: the sof_optim_abi.h entry points around the SVE kernels (Arm Grace, aarch64).
// Built without SVE flags so score() is safe on any CPU; OpenMP over kTile tiles, fixed-order sums.
#include <string>
#include <vector>

#include <omp.h>
#include <sys/auxv.h>

#include "grace_kernel.h"
#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"
#include "optim/sof_optim_shell.h"

#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22) // Linux arm64 uapi value
#endif

namespace sof::grace_adam {
namespace {

Consts consts_of(const sof_optim_hparams& hp) {
    return optim::adam_consts(hp);
}

Buffers buffers_of(const sof_optim_slice& s, const sof_optim_hparams& hp) {
    Buffers b{};
    b.pdt = s.param_dtype;
    b.p = s.param, b.g = s.grad, b.m = s.slot[0].data, b.v = s.slot[1].data;
    b.po = s.param_out, b.mo = s.slot[0].data_out, b.vo = s.slot[1].data_out;
    b.lowp = s.lowp_out;
    b.gdt = s.grad_dtype;
    b.sdt = s.slot[0].format;
    b.ldt = s.lowp_out ? s.lowp_dtype : kNoLowp;
    b.streaming = s.param_out != s.param ? 1 : 0;
    if (b.sdt == SOF_STATE_Q8) {
        b.qb = s.slot[0].block;
        b.ms = s.slot[0].scale, b.vs = s.slot[1].scale;
        b.mso = s.slot[0].scale_out, b.vso = s.slot[1].scale_out;
    }
    b.index0 = s.index0;
    b.seed = hp.seed;
    b.step = hp.step;
    return b;
}

// Runs fn(tile) for every kTile tile of n elements on `threads` OpenMP threads and sums the tile
// statistics in tile order (independent of thread count and vector length).
template <class Fn> sof_optim_result over_tiles(int threads, int64_t n, Fn&& fn) {
    int64_t tiles = (n + kTile - 1) / kTile;
    std::vector<TileStats> stats(static_cast<size_t>(tiles));
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && tiles > 1)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t begin = t * kTile;
        int64_t end = begin + kTile < n ? begin + kTile : n;
        stats[t] = fn(begin, end);
    }
    sof_optim_result r{};
    for (const TileStats& s : stats) {
        r.grad_sumsq += s.sumsq;
        r.nonfinite |= s.nonfinite;
    }
    return r;
}

int32_t sve_score() {
    return (getauxval(AT_HWCAP) & HWCAP_SVE) ? 100 : 0;
}

// The shell's policy (optim/sof_optim_shell.h): grace_adam's kernels and table entries.
struct GraceAdam {
    static constexpr const char* kName = "grace_adam";
    static constexpr const char* kDescription =
        "vector-length-agnostic SVE AdamW/Adam (Arm Grace): fp32/bf16/fp16 grads, fp32/bf16/q8 "
        "moments, fp32 or bf16 (stochastically rounded) master params, bf16/fp16 copy, separate "
        "outputs, results bitwise identical across vector lengths";
    static constexpr sof_target kTarget = SOF_TARGET_HOST;
    static constexpr const char* kAlgorithm = "adam";
    static constexpr int32_t kNumSlots = optim::kAdamSlots;
    static constexpr uint32_t kStateFormats =
        (1u << SOF_STATE_F32) | (1u << SOF_STATE_BF16) | (1u << SOF_STATE_Q8);
    static constexpr uint32_t kParamDtypes = (1u << SOF_DTYPE_F32) | (1u << SOF_DTYPE_BF16);
    static const sof_slot_info* slots() { return optim::adam_slots(); }

    struct Ctx : optim::shell::Base {};

    static int32_t score() { return sve_score(); }

    static const char* variant() {
        if (sve_score() == 0) return "sve (not available)";
        switch (sve_vector_bits()) {
        case 128:
            return "sve128";
        case 256:
            return "sve256";
        case 512:
            return "sve512";
        case 1024:
            return "sve1024";
        case 2048:
            return "sve2048";
        default:
            return "sve";
        }
    }

    static sof_status init(Ctx& ctx, const sof_optim_init&, std::string*) {
        if (ctx.threads <= 0) ctx.threads = omp_get_max_threads();
        return SOF_OK;
    }

    static sof_status step(Ctx& ctx, const sof_optim_slice* slices, const sof_optim_hparams* hp,
                           int32_t count, sof_optim_result* result, void*) {
        return optim::shell::for_each_slice(
            slices, hp, count, result,
            [&](const sof_optim_slice& s, const sof_optim_hparams& h, sof_optim_result* r) {
                Consts k = consts_of(h);
                Buffers b = buffers_of(s, h);
                *r = over_tiles(ctx.threads, s.n, [&](int64_t lo, int64_t hi) {
                    return sve_step_tile(k, b, lo, hi);
                });
                return SOF_OK;
            });
    }

    static sof_status rollback(Ctx& ctx, const sof_optim_slice& s, const sof_optim_hparams& hp,
                               void*) {
        Consts k = consts_of(hp);
        Buffers b = buffers_of(s, hp);
        over_tiles(ctx.threads, s.n, [&](int64_t lo, int64_t hi) {
            sve_rollback_tile(k, b, lo, hi);
            return TileStats{0.0, 0};
        });
        return SOF_OK;
    }

    static sof_status grad_stats(Ctx& ctx, const void* grad, int32_t grad_dtype, int64_t n,
                                 float scale, sof_optim_result* result, void*) {
        *result = over_tiles(ctx.threads, n, [&](int64_t lo, int64_t hi) {
            return sve_stats_tile(grad, grad_dtype, scale, lo, hi);
        });
        return SOF_OK;
    }
};

} // namespace
} // namespace sof::grace_adam

SOF_OPTIM_EXPORT_PLUGIN(sof::grace_adam::GraceAdam)
