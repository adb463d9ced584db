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
#include "optim/sof_optim_shell.h"

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
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
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

// The variant's name and, for the vector variants, the paths of the Q8 moments (KernelSet::q8)
// and of the bf16 master's stochastic rounding (KernelSet::sr): "avx2 (q8 moments: avx2 vector;
// bf16 master: avx2 vector)". Tests assert the paths from it; test_abi_c compares the first word.
std::string variant_text(Variant v) {
    KernelSet k = kernels_of(v);
    std::string s = k.name;
    auto path = [](const char* isa) {
        return std::strcmp(isa, "scalar") == 0 ? std::string("scalar elements")
                                               : std::string(isa) + " vector";
    };
    if (std::strcmp(k.q8, "scalar") != 0 || std::strcmp(k.sr, "scalar") != 0)
        s += " (q8 moments: " + path(k.q8) + "; bf16 master: " + path(k.sr) + ")";
    return s;
}

const char* cpu_adam_variant() {
    static const std::string kText[3] = {variant_text(Variant::Scalar), variant_text(Variant::Avx2),
                                         variant_text(Variant::Avx512)};
    switch (chosen_variant()) {
    case Variant::Avx512:
        return kText[2].c_str();
    case Variant::Avx2:
        return kText[1].c_str();
    case Variant::Scalar:
        return kText[0].c_str();
    case Variant::None:
        return "unavailable (SOF_CPU_ADAM_VARIANT names a variant this CPU lacks)";
    }
    return "unknown";
}

bool aligned(const void* ptr, uintptr_t a) {
    return (reinterpret_cast<uintptr_t>(ptr) & (a - 1)) == 0;
}

// Tile t (kTile elements from t * kTile) of slice s: every pointer advanced to it.
Tile tile_of(const sof_optim_slice& s, int64_t t) {
    int64_t off = t * kTile;
    int64_t n = s.n - off < kTile ? s.n - off : kTile;
    int64_t gsz = sof::optim::dtype_bytes(s.grad_dtype);
    const sof_state_slot& qm = s.slot[0];
    const sof_state_slot& qv = s.slot[1];
    int64_t ssz = sof::optim::state_elem_bytes(qm.format);
    Tile x{};
    x.n = n;
    x.pd = s.param_dtype;
    if (s.param_dtype == SOF_DTYPE_F32) {
        x.p = static_cast<const float*>(s.param) + off;
        x.po = static_cast<float*>(s.param_out) + off;
    } else {
        x.p16 = static_cast<const uint16_t*>(s.param) + off;
        x.po16 = static_cast<uint16_t*>(s.param_out) + off;
    }
    x.g = static_cast<const char*>(s.grad) + off * gsz;
    x.m = static_cast<const char*>(qm.data) + off * ssz;
    x.v = static_cast<const char*>(qv.data) + off * ssz;
    x.mo = static_cast<char*>(qm.data_out) + off * ssz;
    x.vo = static_cast<char*>(qv.data_out) + off * ssz;
    x.lowp = s.lowp_out ? static_cast<char*>(s.lowp_out) + off * 2 : nullptr;
    x.gd = s.grad_dtype;
    x.ld = s.lowp_dtype;
    x.sd = qm.format;
    if (qm.format == SOF_STATE_Q8) { // kTile is a multiple of every block (<= 4096)
        x.qb = qm.block;
        x.ms = qm.scale + off / qm.block;
        x.vs = qv.scale + off / qm.block;
        x.mso = qm.scale_out + off / qm.block;
        x.vso = qv.scale_out + off / qm.block;
    }
    x.index0 = s.index0 + off;
    return x;
}

// Partial sums per tile, then summed in tile order: deterministic for any thread count.
sof_status step_one(const KernelSet& k, int nth, const sof_optim_slice& s,
                    const sof_optim_hparams& hp, sof_optim_result* res, std::string* why) {
    if (s.n == 0) return SOF_OK;
    sof::cpu_adam::StepConsts c = sof::cpu_adam::step_consts(hp);
    bool separate = s.param_out != s.param;
    // Streaming stores need 64-byte aligned destinations (the bf16 copy too: it is streamed in
    // whole 64-byte lines); tile offsets are multiples of 64 bytes.
    bool nt = separate && aligned(s.param_out, 64) && aligned(s.slot[0].data_out, 64) &&
              aligned(s.slot[1].data_out, 64) && (!s.lowp_out || aligned(s.lowp_out, 64));
    int64_t ntiles = (s.n + kTile - 1) / kTile;
    double small[64];
    double* part = ntiles <= 64 ? small : new (std::nothrow) double[ntiles];
    if (!part) {
        *why = "step: out of memory for partial sums";
        return SOF_ERR_OUT_OF_MEMORY;
    }
    const bool q = s.slot[0].format == SOF_STATE_Q8 || s.param_dtype == SOF_DTYPE_BF16;
    sof::cpu_adam::StepTileFn fn = q ? k.step_q : k.step;
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

// The shell's policy (optim/sof_optim_shell.h): cpu_adam's context, kernels and table entries.
struct CpuAdam {
    static constexpr const char* kName = "cpu_adam";
    static constexpr const char* kDescription =
        "AdamW/Adam on x86-64 CPUs: AVX-512, AVX2+FMA or scalar, chosen by CPUID; OpenMP tiles, "
        "fused bf16/fp16 copy, fp32/bf16/q8 moments, fp32 or bf16 (stochastically rounded) "
        "master params, streaming stores for separate outputs";
    static constexpr sof_target kTarget = SOF_TARGET_HOST;
    static constexpr const char* kAlgorithm = "adam";
    static constexpr int32_t kNumSlots = sof::optim::kAdamSlots;
    static constexpr uint32_t kStateFormats =
        (1u << SOF_STATE_F32) | (1u << SOF_STATE_BF16) | (1u << SOF_STATE_Q8);
    static constexpr uint32_t kParamDtypes = (1u << SOF_DTYPE_F32) | (1u << SOF_DTYPE_BF16);
    static const sof_slot_info* slots() { return sof::optim::adam_slots(); }

    struct Ctx : sof::optim::shell::Base {
        KernelSet k;
    };
    using Sh = sof::optim::shell::Shell<CpuAdam>;

    static int32_t score() { return cpu_adam_score(); }
    static const char* variant() { return cpu_adam_variant(); }

    static sof_status init(Ctx& ctx, const sof_optim_init&, std::string*) {
        ctx.k = kernels_of(chosen_variant());
        if (ctx.threads <= 0) ctx.threads = omp_get_max_threads();
        return SOF_OK;
    }

    static sof_status step(Ctx& ctx, const sof_optim_slice* slices, const sof_optim_hparams* hp,
                           int32_t count, sof_optim_result* result, void*) {
        return sof::optim::shell::for_each_slice(
            slices, hp, count, result,
            [&](const sof_optim_slice& s, const sof_optim_hparams& h, sof_optim_result* r) {
                std::string why;
                sof_status st = step_one(ctx.k, ctx.threads, s, h, r, &why);
                return st == SOF_OK ? st : Sh::fail(&ctx, st, why);
            });
    }

    static sof_status rollback(Ctx& ctx, const sof_optim_slice& s, const sof_optim_hparams& hp,
                               void*) {
        sof::cpu_adam::StepConsts c = sof::cpu_adam::step_consts(hp);
        int64_t ntiles = (s.n + kTile - 1) / kTile;
        int nth = ctx.threads;
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1 && ntiles > 1)
        for (int64_t t = 0; t < ntiles; t++) {
            Tile x = tile_of(s, t);
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

    static sof_status grad_stats(Ctx& ctx, const void* grad, int32_t gd, int64_t n, float scale,
                                 sof_optim_result* result, void*) {
        *result = sof_optim_result{};
        if (n == 0) return SOF_OK;
        int64_t ntiles = (n + kTile - 1) / kTile;
        double small[64];
        double* part = ntiles <= 64 ? small : new (std::nothrow) double[ntiles];
        if (!part)
            return Sh::fail(&ctx, SOF_ERR_OUT_OF_MEMORY,
                            "grad_stats: out of memory for partial sums");
        int gsz = gd == SOF_DTYPE_F32 ? 4 : 2;
        sof::cpu_adam::StatsTileFn fn = ctx.k.stats;
        int nth = ctx.threads;
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
};

} // namespace

SOF_OPTIM_EXPORT_PLUGIN(CpuAdam)
