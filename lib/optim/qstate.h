// The quantized optimizer-state format (sof_state_format Q8) and the stochastic rounding of bf16
// master params, defined bit for bit once: header-only, host and CUDA device code (SOF_HD), so the
// reference, every plugin (scalar, AVX2, AVX-512, SVE, CUDA) and the engine encode alike.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/philox.h"

namespace sof::optim {

// ---- Q8: block-wise 8-bit minifloat codes ----
//
// A block of `block` elements stores one fp32 scale and one byte per element. A code is a small
// float with `ebits` exponent bits (bias 2^ebits - 1), `mbits` mantissa bits and subnormals, no
// inf/NaN codes; a signed slot (Adam's m) spends the top bit on the sign (E4M3), an unsigned one
// (Adam's v) uses it for range (E5M3: v ~ g^2 spans twice the binades of m ~ g). Magnitudes run
// from 0 to kQMax = 1.875 (top binade [1, 2)). Decoding is exact: the code's integer mantissa
// (implicit bit included) times a power of two; the element is decode(code) * scale (one fp32
// multiply).
//
// Quantizing a block of new values x[0..len):
//   amax  = the largest |x| (compared as bit patterns: a NaN is larger than inf)
//   amax not finite  -> scale = NaN (0x7fc00000), every code 0
//   amax < FLT_MIN   -> scale = 0, every code 0
//   else scale = fp32(amax / 1.875), inv = fp32(1.875 / amax), code = encode(x * inv):
//   magnitude a = |x * inv|, normal range (a >= 2^(1-bias)): round the fp32 bits to mbits
//   mantissa bits, nearest even (carries into the exponent), and rebias; below it: the subnormal
//   step count a * 2^(bias-1+mbits) rounded to the nearest even integer (by adding 2^23);
//   clamped to the largest code; the sign bit set for negative values of a signed slot unless
//   the magnitude code is 0 (one zero).
// Every operation is an exact integer op or one correctly rounded IEEE fp32 op, so a block
// quantizes to the same bytes on every target from the same fp32 values.

struct QMap {
    int ebits, mbits; // exponent and mantissa bits of the magnitude
    bool is_signed;   // top bit = sign
};

SOF_HD constexpr QMap q8_map(bool is_signed) {
    return is_signed ? QMap{4, 3, true} : QMap{5, 3, false};
}

constexpr float kQMax = 1.875f;        // the largest magnitude of every Q8 map
constexpr int kQBlockMin = 64;         // smallest block (a power of two, sof_optim_check.h)
constexpr int kQBlockMax = 4096;       // largest block a plugin must handle (scratch per block)
constexpr uint32_t kQNaN = 0x7fc00000; // scale of a block holding a non-finite value

SOF_HD constexpr int q_bias(QMap q) {
    return (1 << q.ebits) - 1;
}
SOF_HD constexpr uint32_t q_mag_max(QMap q) { // largest magnitude code
    return (1u << (q.ebits + q.mbits)) - 1u;
}

SOF_HD uint32_t q_f32_bits(float x) {
    return core::f32_bits(x);
}

// Magnitude code of a >= 0 (a finite, a <= about kQMax; larger values clamp).
SOF_HD uint32_t q_encode_mag(float a, QMap q) {
    const int bias = q_bias(q);
    const uint32_t ua = q_f32_bits(a) & 0x7fffffffu;
    const uint32_t min_normal = static_cast<uint32_t>(128 - bias) << 23; // 2^(1-bias)
    uint32_t code;
    if (ua >= min_normal) {
        const int sh = 23 - q.mbits;
        const uint32_t t = ua + ((1u << (sh - 1)) - 1u) + ((ua >> sh) & 1u);
        code = (t >> sh) - (static_cast<uint32_t>(127 - bias) << q.mbits);
    } else {
        // a * 2^(bias-1+mbits) is exact (a power of two); adding 2^23 rounds it to the nearest
        // even integer, which the low mantissa bits then hold
        const float up = core::bits_f32(static_cast<uint32_t>(127 + bias - 1 + q.mbits) << 23);
        const float r = core::bits_f32(ua) * up + 8388608.0f;
        code = q_f32_bits(r) - 0x4b000000u;
    }
    const uint32_t mx = q_mag_max(q);
    return code < mx ? code : mx;
}

// Code of y (already divided by the block's scale).
SOF_HD uint8_t q_encode(float y, QMap q) {
    const uint32_t mag = q_encode_mag(y, q);
    const uint32_t sign = q.is_signed && mag != 0 ? (q_f32_bits(y) >> 31) << 7 : 0u;
    return static_cast<uint8_t>(sign | mag);
}

// The value of a code in units of the block's scale (exact).
SOF_HD float q_decode(uint8_t c, QMap q) {
    const int bias = q_bias(q);
    const uint32_t mag = q.is_signed ? (c & 0x7fu) : c;
    const uint32_t e = mag >> q.mbits, f = mag & ((1u << q.mbits) - 1u);
    const uint32_t mant = e != 0 ? f | (1u << q.mbits) : f;             // integer significand
    const int ex = (e != 0 ? static_cast<int>(e) : 1) - bias - q.mbits; // its power of two
    const float v =
        static_cast<float>(mant) * core::bits_f32(static_cast<uint32_t>(ex + 127) << 23);
    return q.is_signed && (c & 0x80u) ? -v : v;
}

// Scale and encoding factor of a block whose largest magnitude has bits `amax_bits` (sign
// cleared). ok = false: store `scale` and code 0 everywhere (zero or non-finite block).
struct QBlockScale {
    float scale; // stored: element = decode(code) * scale
    float inv;   // encode(x * inv)
    bool ok;
};
SOF_HD QBlockScale q_block_scale(uint32_t amax_bits) {
    if (amax_bits >= 0x7f800000u) return {core::bits_f32(kQNaN), 0.0f, false};
    if (amax_bits < 0x00800000u) return {0.0f, 0.0f, false};
    const float amax = core::bits_f32(amax_bits);
    return {amax / kQMax, kQMax / amax, true};
}

// Scalar quantization of one block (the reference; every plugin's vector code matches it).
inline void q_quantize_block(const float* x, int64_t len, QMap q, uint8_t* codes, float* scale) {
    uint32_t amax = 0;
    for (int64_t i = 0; i < len; i++) {
        const uint32_t a = q_f32_bits(x[i]) & 0x7fffffffu;
        amax = a > amax ? a : amax;
    }
    const QBlockScale bs = q_block_scale(amax);
    *scale = bs.scale;
    for (int64_t i = 0; i < len; i++)
        codes[i] = bs.ok ? q_encode(x[i] * bs.inv, q) : uint8_t{0};
}

// Element value of a code in a block of `scale`.
SOF_HD float q_value(uint8_t c, float scale, QMap q) {
    return q_decode(c, q) * scale;
}

// ---- stochastic rounding of bf16 master params ----
//
// Element i (its number in the run's flat parameter space: slice index0 + offset) of optimizer
// step t draws word i % 4 of Philox4x32-10 under key `seed` at counter (i / 4, t, kSrStream),
// and rounds its fp32 value x to bf16 as (bits(x) + (word >> 16)) >> 16: up (away from zero)
// with probability equal to the dropped fraction, so the expected bf16 value is x. NaN rounds
// as core::f32_to_bf16 (quiet, sign kept); a value past the largest bf16 may round to inf, as
// round to nearest does.

constexpr uint32_t kSrStream = 0x53520001u; // Philox stream word of the stochastic rounding

SOF_HD uint32_t sr_bits(uint64_t seed, int64_t step, uint64_t index) {
    const core::Philox4 d =
        core::philox_draw(seed, index >> 2, static_cast<uint32_t>(step), kSrStream);
    return d.v[index & 3u] >> 16;
}

SOF_HD uint16_t f32_to_bf16_sr(float x, uint32_t r16) {
    const uint32_t u = q_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return core::f32_to_bf16(x);
    return static_cast<uint16_t>((u + r16) >> 16);
}

} // namespace sof::optim
