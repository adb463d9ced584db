// grace_adam plugin: the sof_optim_abi.h entry points around the SVE kernels (Arm Grace, aarch64).
// Built without SVE flags so score() is safe on any CPU; OpenMP over kTile tiles, fixed-order sums.
#include <cmath>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <omp.h>
#include <sys/auxv.h>

#include "grace_kernel.h"
#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"

#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22) // Linux arm64 uapi value
#endif

namespace sof::grace_adam {
namespace {

struct Ctx {
    int threads = 1; // OpenMP threads per call
    std::mutex mu;
    std::string error; // last failure message
};

sof_status fail(Ctx* ctx, sof_status st, const std::string& msg) {
    if (ctx) {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->error = "grace_adam: " + msg;
    }
    return st;
}

sof_status check_slice(Ctx* ctx, const sof_adam_slice* s, const sof_adam_hparams* hp, int index) {
    std::string why;
    sof_status st = optim::check_adam_slice(s, hp, index, &why);
    return st == SOF_OK ? st : fail(ctx, st, why);
}

Consts consts_of(const sof_adam_hparams& hp) {
    return optim::adam_consts(hp);
}

Buffers buffers_of(const sof_adam_slice& s) {
    Buffers b{};
    b.p = s.param, b.g = s.grad, b.m = s.exp_avg, b.v = s.exp_avg_sq;
    b.po = s.param_out, b.mo = s.exp_avg_out, b.vo = s.exp_avg_sq_out;
    b.lowp = s.lowp_out;
    b.gdt = s.grad_dtype;
    b.sdt = s.state_dtype;
    b.ldt = s.lowp_out ? s.lowp_dtype : kNoLowp;
    b.streaming = s.param_out != s.param ? 1 : 0;
    return b;
}

// Runs fn(tile) for every kTile tile of n elements on `threads` OpenMP threads and sums the tile
// statistics in tile order (independent of thread count and vector length).
template <class Fn> sof_adam_result over_tiles(int threads, int64_t n, Fn&& fn) {
    int64_t tiles = (n + kTile - 1) / kTile;
    std::vector<TileStats> stats(static_cast<size_t>(tiles));
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && tiles > 1)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t begin = t * kTile;
        int64_t end = begin + kTile < n ? begin + kTile : n;
        stats[t] = fn(begin, end);
    }
    sof_adam_result r{};
    for (const TileStats& s : stats) {
        r.grad_sumsq += s.sumsq;
        r.nonfinite |= s.nonfinite;
    }
    return r;
}

// ---- ABI entry points ----

int32_t score() {
    return (getauxval(AT_HWCAP) & HWCAP_SVE) ? 100 : 0;
}

const char* variant() {
    if (score() == 0) return "sve (not available)";
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

sof_status create(const sof_optim_init* init, sof_optim_ctx** out) {
    if (!init || !out || init->struct_size < sizeof(sof_optim_init))
        return SOF_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    if (score() == 0) return SOF_ERR_UNSUPPORTED;
    Ctx* ctx = new (std::nothrow) Ctx;
    if (!ctx) return SOF_ERR_OUT_OF_MEMORY;
    ctx->threads = init->num_threads > 0 ? init->num_threads : omp_get_max_threads();
    *out = reinterpret_cast<sof_optim_ctx*>(ctx);
    return SOF_OK;
}

void destroy(sof_optim_ctx* c) {
    delete reinterpret_cast<Ctx*>(c);
}

const char* last_error(sof_optim_ctx* c) {
    thread_local std::string copy; // stable storage for the returned pointer, per thread
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return "grace_adam: null context";
    std::lock_guard<std::mutex> lock(ctx->mu);
    copy = ctx->error;
    return copy.c_str();
}

sof_status step_multi(sof_optim_ctx* c, const sof_adam_slice* slices, const sof_adam_hparams* hp,
                      int32_t count, sof_adam_result* result, void*) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
    if (count < 0 || (count > 0 && (!slices || !hp)))
        return fail(ctx, SOF_ERR_INVALID_ARGUMENT, "adam_step_multi: bad slice list");
    for (int32_t i = 0; i < count; i++) {
        sof_status st = check_slice(ctx, &slices[i], &hp[i], i);
        if (st != SOF_OK) return st;
    }
    sof_adam_result total{};
    for (int32_t i = 0; i < count; i++) {
        Consts k = consts_of(hp[i]);
        Buffers b = buffers_of(slices[i]);
        sof_adam_result r = over_tiles(ctx->threads, slices[i].n, [&](int64_t lo, int64_t hi) {
            return sve_step_tile(k, b, lo, hi);
        });
        total.grad_sumsq += r.grad_sumsq;
        total.nonfinite |= r.nonfinite;
    }
    if (result) *result = total;
    return SOF_OK;
}

sof_status step(sof_optim_ctx* c, const sof_adam_slice* slice, const sof_adam_hparams* hp,
                sof_adam_result* result, void* stream) {
    return step_multi(c, slice, hp, 1, result, stream);
}

sof_status rollback(sof_optim_ctx* c, const sof_adam_slice* slice, const sof_adam_hparams* hp,
                    void*) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
    std::string why;
    sof_status st = optim::check_adam_rollback(slice, hp, &why);
    if (st != SOF_OK) return fail(ctx, st, why);
    Consts k = consts_of(*hp);
    Buffers b = buffers_of(*slice);
    over_tiles(ctx->threads, slice->n, [&](int64_t lo, int64_t hi) {
        sve_rollback_tile(k, b, lo, hi);
        return TileStats{0.0, 0};
    });
    return SOF_OK;
}

sof_status grad_stats(sof_optim_ctx* c, const void* grad, int32_t grad_dtype, int64_t n,
                      float scale, sof_adam_result* result, void*) {
    Ctx* ctx = reinterpret_cast<Ctx*>(c);
    if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
    std::string why;
    if (sof_status st = optim::check_grad_stats(grad, grad_dtype, n, result, &why); st != SOF_OK)
        return fail(ctx, st, why);
    *result = over_tiles(ctx->threads, n, [&](int64_t lo, int64_t hi) {
        return sve_stats_tile(grad, grad_dtype, scale, lo, hi);
    });
    return SOF_OK;
}

const sof_optim_plugin kPlugin = {
    SOF_OPTIM_ABI_VERSION,
    sizeof(sof_optim_plugin),
    "grace_adam",
    "vector-length-agnostic SVE AdamW/Adam (Arm Grace): fp32/bf16/fp16 grads, fp32/bf16 moments, "
    "bf16/fp16 copy, "
    "separate outputs, results bitwise identical across vector lengths",
    SOF_TARGET_HOST,
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
} // namespace sof::grace_adam

extern "C" __attribute__((visibility("default"))) const sof_optim_plugin*
sof_optim_plugin_get(void) {
    return &sof::grace_adam::kPlugin;
}
