// Dropout whose mask is never stored: the keep bit of an element is a Philox4x32-10 word
// (core/philox.h) keyed by seed, step, micro-step, layer, purpose and the element's global index.
#pragma once

#include <cstdint>

#include "core/dtype.h" // SOF_HD
#include "core/philox.h"
#include "kernels/exec.h"

namespace sof::kernels {

// What a mask is for: one stream per purpose of a layer (a 4-bit field of the key).
enum class DropoutTag : uint32_t {
    AttnProbs = 1,    // attention probabilities (AttnArgs::dropout, attention.h)
    ResidualAttn = 2, // the attention branch before its residual add (seed_oss residual_dropout)
    ResidualMlp = 3,  // the MLP branch before its residual add
    Hidden = 4,       // any other activation (embedding output, ...)
};

// The key of a mask. Elements are numbered by their GLOBAL coordinates, so the bits are the same
// on the CPU and CUDA twins, at any thread count, rank count (ZeRO-3 data parallel: each rank
// passes its first global batch row) and Ulysses degree (each rank passes its first global head or
// token), and on resume (a replayed step has the same key):
//   attention probability (b, h, query t, key t2) of a call with T positions (whole sequences):
//     e = (((batch0 + b) * heads + head0 + h) * T + t) * T + t2
//   dropout op element (b, t, c) of a (B, T, C) call:
//     e = ((batch0 + b) * tokens + token0 + t) * C + c
// Element e keeps (x -> x / (1 - p)) iff word e % 4 of philox_draw(seed, e / 4, step,
// micro << 16 | layer << 4 | tag) is >= round(p * 2^32), else becomes 0: keep rate 1 - p.
// The forward and the backward (and a recompute) with the same key see the same mask.
struct DropoutKey {
    uint64_t seed = 0;  // the run's seed
    uint32_t step = 0;  // optimizer step
    uint32_t micro = 0; // micro-step of gradient accumulation, < 2^16 (0 when batch0 numbers the
                        // rows of every micro-step of the step: then the bits do not depend on
                        // how the step's rows are split into micro-steps either)
    uint32_t layer = 0; // block index, < 2^12
    DropoutTag tag = DropoutTag::AttnProbs;
    uint64_t batch0 = 0; // global batch row of the call's batch row 0
    int head0 = 0;       // attention: global query head of the call's head 0 (Ulysses: the rank's
                         // first head, rank * NH / sp)
    int heads = 0;       // attention: global query head count (0: the call's num_heads)
    int token0 = 0; // dropout op: global position of the call's token 0 (Ulysses: rank * T / sp)
    int tokens = 0; // dropout op: global sequence length (0: the call's T)
};

// A key resolved for the kernels (dropout_mask below): the Philox key and stream words, the
// threshold of the kept words and the scale 1 / (1 - p). threshold 0: no dropout (p = 0).
struct DropoutMask {
    uint64_t seed = 0;
    uint32_t a = 0, b = 0; // philox_draw's stream words: step, micro << 16 | layer << 4 | tag
    uint32_t threshold = 0;
    float scale = 1.0f;
    SOF_HD bool active() const { return threshold != 0u; }
    // The four words of elements 4 * (e / 4) .. + 3.
    SOF_HD core::Philox4 draw(uint64_t e) const { return core::philox_draw(seed, e >> 2, a, b); }
    SOF_HD bool keep_word(uint32_t word) const { return word >= threshold; }
    // Word i (0..3) of a draw, by selects (a register array indexed at run time would go to a
    // GPU thread's local memory).
    SOF_HD static uint32_t word(const core::Philox4& w, uint32_t i) {
        return i == 0u ? w.v[0] : i == 1u ? w.v[1] : i == 2u ? w.v[2] : w.v[3];
    }
    SOF_HD bool keep(uint64_t e) const {
        return keep_word(word(draw(e), static_cast<uint32_t>(e & 3u)));
    }
    // The factor of element e: scale (kept) or 0 (dropped); 1 when not active.
    SOF_HD float factor(uint64_t e) const {
        if (!active()) return 1.0f;
        return keep(e) ? scale : 0.0f;
    }
};

// Checks p (0 <= p < 1) and the key's fields (micro < 2^16, layer < 2^12) and resolves them;
// throws core::Error (Config) naming op and the bad value.
DropoutMask dropout_mask(float p, const DropoutKey& k, const char* op);

namespace detail {
// (first + count) * per_row <= 2^64 - 1: the global element indices of rows first .. first +
// count - 1 of per_row elements each fit in 64 bits.
inline bool global_index_fits(uint64_t first, uint64_t count, uint64_t per_row) {
    const uint64_t rows = first + count;
    if (rows < first) return false;
    return per_row == 0 || rows <= ~uint64_t{0} / per_row;
}
} // namespace detail

// The dropout op's arguments: a contiguous (B, T, C) tensor (rows of C), rate p, the mask key
// (batch0, token0, tokens: the call's place in the global (batch, sequence)).
struct DropoutArgs {
    int B, T, C;
    float p;
    DropoutKey key;
};

// out = x * keep / (1 - p) (out may alias x). The backward is the same op on the gradient with
// the same key: dx = dout * keep / (1 - p) (dropout_backward). p = 0 copies.
namespace cpu {
void dropout_forward(float* out, const float* x, const DropoutArgs& a);
} // namespace cpu

namespace cuda {
template <class T> void dropout_forward(T* out, const T* x, const DropoutArgs& a, void* stream);
} // namespace cuda

namespace detail {
// Throws core::Error (Config) naming op when the shape or the key's global extents (token0,
// tokens, batch0) are not ones the op can number; *tokens = the global sequence length.
void check_dropout_args(const DropoutArgs& a, const char* op, int* tokens);
} // namespace detail

template <class T> void dropout_forward(const Exec& ex, T* out, const T* x, const DropoutArgs& a) {
    SOF_KERNEL_DISPATCH(ex, T, "dropout_forward", (cpu::dropout_forward(out, x, a)),
                        (cuda::dropout_forward(out, x, a, ex.stream)));
}

// dx = dout * keep / (1 - p) with the forward's key (the mask is regenerated, never stored).
template <class T>
void dropout_backward(const Exec& ex, T* dx, const T* dout, const DropoutArgs& a) {
    SOF_KERNEL_DISPATCH(ex, T, "dropout_backward", (cpu::dropout_forward(dx, dout, a)),
                        (cuda::dropout_forward(dx, dout, a, ex.stream)));
}

} // namespace sof::kernels
