// cpu_adam plugin: the sof_optim ABI table, variant selection by CPUID, OpenMP over tiles.
// Kernels per instruction set live in kernels_*.cpp; this file holds no ISA-specific code.
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cpu_adam_kernels.h"
#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"

namespace {

using sof::cpu_adam::KernelSet;
using sof::cpu_adam::Tile;

// Elements per tile: ~240 KB of traffic per tile with the bf16 copy (fits in L2); tiles are the
// unit of OpenMP work and of the fp64 statistics partial sums (so results do not depend on the
// thread count).
constexpr int64_t kTile = 8192;

enum class Variant { None, Scalar, Avx2, Avx512 };

bool cpu_has(Variant v) {
#ifndef SOF_CPU_ADAM_X86
    return v == Variant::Scalar;
#else
    switch (v) {
    case Variant::Scalar:
        return true;
    case Variant::Avx2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case Variant::Avx512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f");
    case Variant::None:
        return false;
    }
    return false;
#endif
}

// SOF_CPU_ADAM_VARIANT=scalar|avx2|avx512 forces a variant; unset or "auto" = best supported.
// Returns None when the forced variant is unknown or cannot run here.
Variant chosen_variant() {
    const char* env = std::getenv("SOF_CPU_ADAM_VARIANT");
    if (env && *env && std::strcmp(env, "auto") != 0) {
        Variant v = Variant::None;
        if (!std::strcmp(env, "scalar")) v = Variant::Scalar;
        if (!std::strcmp(env, "avx2")) v = Variant::Avx2;
        if (!std::strcmp(env, "avx512")) v = Variant::Avx512;
        return cpu_has(v) ? v : Variant::None;
    }
    if (cpu_has(Variant::Avx512)) return Variant::Avx512;
    if (cpu_has(Variant::Avx2)) return Variant::Avx2;
    return Variant::Scalar;
}

KernelSet kernels_of(Variant v) {
#ifdef SOF_CPU_ADAM_X86
    if (v == Variant::Avx512) return sof::cpu_adam::avx512_kernels();
    if (v == Variant::Avx2) return sof::cpu_adam::avx2_kernels();
#endif
    (void)v;
    return sof::cpu_adam::scalar_kernels();
}

int32_t cpu_adam_score() {
    switch (chosen_variant()) {
    case Variant::Avx512:
        return 30;
    case Variant::Avx2:
        return 20;
    case Variant::Scalar:
        return 10;
    case Variant::None:
        return 0;
    }
    return 0;
}

const char* cpu_adam_variant() {
    switch (chosen_variant()) {
    case Variant::Avx512:
        return "avx512";
    case Variant::Avx2:
        return "avx2";
    case Variant::Scalar:
        return "scalar";
    case Variant::None:
        return "unavailable (SOF_CPU_ADAM_VARIANT names a variant this CPU lacks)";
    }
    return "unknown";
}

// Message of the last failure on the calling thread (calls are synchronous on the caller's
// thread, so a per-thread buffer is the per-call error slot).
thread_local std::string t_last_error;

sof_status fail(sof_status st, const char* msg) {
    t_last_error = msg;
    return st;
}

} // namespace

struct sof_optim_ctx {
    KernelSet k;
    int threads; // OpenMP threads per call (1 = no parallel region)
};

namespace {

sof_status cpu_adam_create(const sof_optim_init* init, sof_optim_ctx** out) {
    if (!init || !out || init->struct_size < sizeof(sof_optim_init))
        return fail(SOF_ERR_INVALID_ARGUMENT,
                    "create: null init/out or init.struct_size too small");
    Variant v = chosen_variant();
    if (v == Variant::None)
        return fail(SOF_ERR_UNSUPPORTED,
                    "create: SOF_CPU_ADAM_VARIANT names a variant this CPU cannot run");
    auto* ctx = new (std::nothrow) sof_optim_ctx;
    if (!ctx) return fail(SOF_ERR_OUT_OF_MEMORY, "create: out of memory");
    ctx->k = kernels_of(v);
    ctx->threads = init->num_threads > 0 ? init->num_threads : omp_get_max_threads();
    *out = ctx;
    return SOF_OK;
}

void cpu_adam_destroy(sof_optim_ctx* ctx) {
    delete ctx;
}

const char* cpu_adam_last_error(sof_optim_ctx*) {
    return t_last_error.c_str();
}

sof_status check_slice(const sof_adam_slice* s, const sof_adam_hparams* hp, int index) {
    std::string why;
    sof_status st = sof::optim::check_adam_slice(s, hp, index, &why);
    if (st != SOF_OK) t_last_error = why;
    return st;
}

bool aligned(const void* ptr, uintptr_t a) {
    return (reinterpret_cast<uintptr_t>(ptr) & (a - 1)) == 0;
}

Tile tile_of(const sof_adam_slice& s, int64_t t) {
    int64_t off = t * kTile;
    int64_t n = s.n - off < kTile ? s.n - off : kTile;
    int64_t gsz = sof::optim::dtype_bytes(s.grad_dtype);
    int64_t ssz = sof::optim::dtype_bytes(s.state_dtype);
    Tile x;
    x.n = n;
    x.p = s.param + off;
    x.g = static_cast<const char*>(s.grad) + off * gsz;
    x.m = static_cast<const char*>(s.exp_avg) + off * ssz;
    x.v = static_cast<const char*>(s.exp_avg_sq) + off * ssz;
    x.po = s.param_out + off;
    x.mo = static_cast<char*>(s.exp_avg_out) + off * ssz;
    x.vo = static_cast<char*>(s.exp_avg_sq_out) + off * ssz;
    x.lowp = s.lowp_out ? static_cast<char*>(s.lowp_out) + off * 2 : nullptr;
    x.gd = s.grad_dtype;
    x.ld = s.lowp_dtype;
    x.sd = s.state_dtype;
    return x;
}

// Partial sums per tile, then summed in tile order: deterministic for any thread count.
sof_status step_one(sof_optim_ctx* ctx, const sof_adam_slice& s, const sof_adam_hparams& hp,
                    sof_adam_result* res) {
    if (s.n == 0) return SOF_OK;
    sof::cpu_adam::StepConsts c = sof::cpu_adam::step_consts(hp);
    bool separate = s.param_out != s.param;
    // Streaming stores need 64-byte aligned destinations (the bf16 copy too: it is streamed in
    // whole 64-byte lines); tile offsets are multiples of 64 bytes.
    bool nt = separate && aligned(s.param_out, 64) && aligned(s.exp_avg_out, 64) &&
              aligned(s.exp_avg_sq_out, 64) && (!s.lowp_out || aligned(s.lowp_out, 64));
    int64_t ntiles = (s.n + kTile - 1) / kTile;
    double small[64];
    double* part = ntiles <= 64 ? small : new (std::nothrow) double[ntiles];
    if (!part) return fail(SOF_ERR_OUT_OF_MEMORY, "adam_step: out of memory for partial sums");
    sof::cpu_adam::StepTileFn fn = ctx->k.step;
    int nth = ctx->threads;
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1 && ntiles > 1)
    for (int64_t t = 0; t < ntiles; t++)
        part[t] = fn(c, tile_of(s, t), nt);
    double sum = 0.0;
    for (int64_t t = 0; t < ntiles; t++)
        sum += part[t];
    if (part != small) delete[] part;
    res->grad_sumsq += sum;
    if (!(sum <= 1e300)) res->nonfinite = 1; // NaN or Inf: some scaled grad was not finite
    return SOF_OK;
}

sof_status cpu_adam_step(sof_optim_ctx* ctx, const sof_adam_slice* s, const sof_adam_hparams* hp,
                         sof_adam_result* result, void*) {
    if (!ctx || !result) return fail(SOF_ERR_INVALID_ARGUMENT, "adam_step: null ctx or result");
    if (sof_status st = check_slice(s, hp, 0); st != SOF_OK) return st;
    *result = sof_adam_result{};
    return step_one(ctx, *s, *hp, result);
}

sof_status cpu_adam_step_multi(sof_optim_ctx* ctx, const sof_adam_slice* slices,
                               const sof_adam_hparams* hp, int32_t count, sof_adam_result* result,
                               void*) {
    if (!ctx || !result || count < 0 || (count > 0 && (!slices || !hp)))
        return fail(SOF_ERR_INVALID_ARGUMENT, "adam_step_multi: null argument or negative count");
    for (int32_t i = 0; i < count; i++)
        if (sof_status st = check_slice(&slices[i], &hp[i], i); st != SOF_OK) return st;
    *result = sof_adam_result{};
    for (int32_t i = 0; i < count; i++)
        if (sof_status st = step_one(ctx, slices[i], hp[i], result); st != SOF_OK) return st;
    return SOF_OK;
}

sof_status cpu_adam_rollback(sof_optim_ctx* ctx, const sof_adam_slice* s,
                             const sof_adam_hparams* hp, void*) {
    if (!ctx) return fail(SOF_ERR_INVALID_ARGUMENT, "adam_rollback: null ctx");
    std::string why;
    if (sof_status st = sof::optim::check_adam_rollback(s, hp, &why); st != SOF_OK) {
        t_last_error = why;
        return st;
    }
    sof::cpu_adam::StepConsts c = sof::cpu_adam::step_consts(*hp);
    int64_t ntiles = (s->n + kTile - 1) / kTile;
    int nth = ctx->threads;
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1 && ntiles > 1)
    for (int64_t t = 0; t < ntiles; t++) {
        Tile x = tile_of(*s, t);
        uint16_t* lowp = static_cast<uint16_t*>(x.lowp);
        for (int64_t i = 0; i < x.n; i++) {
            float p = x.p[i], m = sof::optim::adam_ref_state(x.m, x.sd, i);
            float v = sof::optim::adam_ref_state(x.v, x.sd, i);
            sof::cpu_adam::rollback_elem(c, p, m, v, sof::optim::adam_ref_grad(x.g, x.gd, i));
            x.po[i] = p;
            sof::optim::adam_ref_store_state(x.mo, x.sd, i, m);
            sof::optim::adam_ref_store_state(x.vo, x.sd, i, v);
            if (lowp) lowp[i] = sof::optim::adam_ref_lowp(p, x.ld);
        }
    }
    return SOF_OK;
}

sof_status cpu_adam_grad_stats(sof_optim_ctx* ctx, const void* grad, int32_t gd, int64_t n,
                               float scale, sof_adam_result* result, void*) {
    if (!ctx) return fail(SOF_ERR_INVALID_ARGUMENT, "grad_stats: null ctx");
    std::string why;
    if (sof_status st = sof::optim::check_grad_stats(grad, gd, n, result, &why); st != SOF_OK) {
        t_last_error = why;
        return st;
    }
    *result = sof_adam_result{};
    if (n == 0) return SOF_OK;
    int64_t ntiles = (n + kTile - 1) / kTile;
    double small[64];
    double* part = ntiles <= 64 ? small : new (std::nothrow) double[ntiles];
    if (!part) return fail(SOF_ERR_OUT_OF_MEMORY, "grad_stats: out of memory for partial sums");
    int gsz = gd == SOF_DTYPE_F32 ? 4 : 2;
    sof::cpu_adam::StatsTileFn fn = ctx->k.stats;
    int nth = ctx->threads;
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1 && ntiles > 1)
    for (int64_t t = 0; t < ntiles; t++) {
        int64_t off = t * kTile;
        part[t] = fn(static_cast<const char*>(grad) + off * gsz, gd,
                     n - off < kTile ? n - off : kTile, scale);
    }
    double sum = 0.0;
    for (int64_t t = 0; t < ntiles; t++)
        sum += part[t];
    if (part != small) delete[] part;
    result->grad_sumsq = sum;
    result->nonfinite = !(sum <= 1e300) ? 1 : 0;
    return SOF_OK;
}

const sof_optim_plugin kPlugin = {
    SOF_OPTIM_ABI_VERSION,
    sizeof(sof_optim_plugin),
    "cpu_adam",
    "AdamW/Adam on x86-64 CPUs: AVX-512, AVX2+FMA or scalar, chosen by CPUID; OpenMP tiles, "
    "fused bf16/fp16 copy, fp32 or bf16 moments, streaming stores for separate outputs",
    SOF_TARGET_HOST,
    cpu_adam_score,
    cpu_adam_variant,
    cpu_adam_create,
    cpu_adam_destroy,
    cpu_adam_last_error,
    cpu_adam_step,
    cpu_adam_step_multi,
    cpu_adam_rollback,
    cpu_adam_grad_stats,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const sof_optim_plugin*
sof_optim_plugin_get(void) {
    return &kPlugin;
}
