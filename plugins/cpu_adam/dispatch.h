// cpu_adam's one dispatch tree: a tile's run-time formats (grads, copy, moments, master) and
// hyperparameters (decay, streaming stores) to a vector variant's compile-time step kernels.
#pragma once

#include <xmmintrin.h>

#include "cpu_adam_kernels.h"

namespace sof::cpu_adam {

// LD of a bf16 master: the copy's dtype is read at run time (one predictable branch).
constexpr int kLdRuntime = -2;

// A variant gives its kernels as
//   struct K { template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
//              static double run(const StepConsts&, const Tile&); };
// GD grads, LD copy (-1 none), SD moments, PD master (sof_dtype / sof_state_format values); NT
// streaming stores; WD weight decay; L2 Adam's L2 penalty instead of AdamW's decay. The functions
// below only branch; the kernels carry the variant's target attributes (never inlined here).
template <class K, int GD, int LD, int SD, int PD, bool NT>
double by_decay(const StepConsts& c, const Tile& t) {
    if (c.wd == 0.0f) return K::template run<GD, LD, SD, PD, NT, false, false>(c, t);
    if (c.l2) return K::template run<GD, LD, SD, PD, NT, true, true>(c, t);
    return K::template run<GD, LD, SD, PD, NT, true, false>(c, t);
}

template <class K, int GD, int LD, int SD, int PD>
double by_nt(const StepConsts& c, const Tile& t, bool nt) {
    return nt ? by_decay<K, GD, LD, SD, PD, true>(c, t) : by_decay<K, GD, LD, SD, PD, false>(c, t);
}

// fp32 master with fp32 or bf16 moments (K: the variant's plain tile kernel).
template <class K, int GD> double by_copy(const StepConsts& c, const Tile& t, bool nt) {
    constexpr int F = SOF_DTYPE_F32;
    const bool bf = t.sd == SOF_STATE_BF16;
    if (!t.lowp)
        return bf ? by_nt<K, GD, -1, SOF_STATE_BF16, F>(c, t, nt)
                  : by_nt<K, GD, -1, SOF_STATE_F32, F>(c, t, nt);
    if (t.ld == SOF_DTYPE_F16)
        return bf ? by_nt<K, GD, SOF_DTYPE_F16, SOF_STATE_BF16, F>(c, t, nt)
                  : by_nt<K, GD, SOF_DTYPE_F16, SOF_STATE_F32, F>(c, t, nt);
    return bf ? by_nt<K, GD, SOF_DTYPE_BF16, SOF_STATE_BF16, F>(c, t, nt)
              : by_nt<K, GD, SOF_DTYPE_BF16, SOF_STATE_F32, F>(c, t, nt);
}

// Q8 moments and/or a bf16 master (tile_needs_q; K: the variant's quantized kernel).
template <class K, int GD> double by_format(const StepConsts& c, const Tile& t, bool nt) {
    if (t.pd == SOF_DTYPE_BF16) {
        if (t.sd == SOF_STATE_Q8)
            return by_nt<K, GD, kLdRuntime, SOF_STATE_Q8, SOF_DTYPE_BF16>(c, t, nt);
        if (t.sd == SOF_STATE_BF16)
            return by_nt<K, GD, kLdRuntime, SOF_STATE_BF16, SOF_DTYPE_BF16>(c, t, nt);
        return by_nt<K, GD, kLdRuntime, SOF_STATE_F32, SOF_DTYPE_BF16>(c, t, nt);
    }
    if (!t.lowp) return by_nt<K, GD, -1, SOF_STATE_Q8, SOF_DTYPE_F32>(c, t, nt);
    if (t.ld == SOF_DTYPE_F16)
        return by_nt<K, GD, SOF_DTYPE_F16, SOF_STATE_Q8, SOF_DTYPE_F32>(c, t, nt);
    return by_nt<K, GD, SOF_DTYPE_BF16, SOF_STATE_Q8, SOF_DTYPE_F32>(c, t, nt);
}

// A variant's StepTileFn for fp32 masters with fp32/bf16 moments (Tk) and, where the tile needs
// it, for Q8 moments or a bf16 master (Qk). Q8's decode passes subnormal fp32 values through a
// multiply (exact with IEEE subnormals): under MXCSR's DAZ or FTZ (this project never sets them,
// a host process might) such a tile takes the scalar path, with the variant's sums (stats).
template <class Tk, class Qk>
double dispatch_step(const StepConsts& c, const Tile& t, bool nt, StatsTileFn stats) {
    const bool q = tile_needs_q(t);
    if (q && t.sd == SOF_STATE_Q8 && (_mm_getcsr() & 0x8040u) != 0) {
        step_tile_q_scalar(c, t);
        return stats(t.g, t.gd, t.n, c.scale);
    }
    if (t.gd == SOF_DTYPE_BF16)
        return q ? by_format<Qk, SOF_DTYPE_BF16>(c, t, nt) : by_copy<Tk, SOF_DTYPE_BF16>(c, t, nt);
    if (t.gd == SOF_DTYPE_F16)
        return q ? by_format<Qk, SOF_DTYPE_F16>(c, t, nt) : by_copy<Tk, SOF_DTYPE_F16>(c, t, nt);
    return q ? by_format<Qk, SOF_DTYPE_F32>(c, t, nt) : by_copy<Tk, SOF_DTYPE_F32>(c, t, nt);
}

} // namespace sof::cpu_adam
