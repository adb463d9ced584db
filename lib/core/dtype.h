// Scalar dtypes and conversions: bf16 and fp16 with round-to-nearest-even, NaN kept. The one
// rounding of the tree: header-only and callable from host and CUDA device code (SOF_HD), so
// plugins, kernels, the runtime and the file readers round exactly alike.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SOF_HD __host__ __device__ __forceinline__
#else
#define SOF_HD inline
#endif

namespace sof::core {

enum class DType { F32, BF16, F16 };

inline const char* dtype_name(DType t) {
    return t == DType::F32 ? "fp32" : (t == DType::BF16 ? "bf16" : "fp16");
}
inline int dtype_size(DType t) {
    return t == DType::F32 ? 4 : 2;
}

SOF_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}
SOF_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

// fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN with its sign.
SOF_HD uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<uint16_t>(u >> 16);
}
SOF_HD float bf16_to_f32(uint16_t h) {
    return bits_f32(static_cast<uint32_t>(h) << 16);
}
// fp32 rounded to the nearest bf16 value, as fp32 (what a bf16 store and load gives).
SOF_HD float round_bf16(float f) {
    return bf16_to_f32(f32_to_bf16(f));
}

// A bf16 value in memory (2 bytes, the bit pattern of __nv_bfloat16): the element type of bf16
// tensors in host code and in kernel signatures that host code calls.
struct bf16 {
    uint16_t bits;
};
SOF_HD bf16 to_bf16(float f) {
    return bf16{f32_to_bf16(f)};
}
SOF_HD float to_f32(bf16 h) {
    return bf16_to_f32(h.bits);
}
SOF_HD float to_f32(float f) {
    return f;
}
// T = float or bf16: the value of f stored as a T (bf16: round to nearest even).
template <class T> SOF_HD T from_f32(float f);
template <> SOF_HD float from_f32<float>(float f) {
    return f;
}
template <> SOF_HD bf16 from_f32<bf16>(float f) {
    return to_bf16(f);
}

// fp32 -> IEEE fp16, round to nearest even; overflow to inf, NaN kept, subnormals handled.
SOF_HD uint16_t f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
    if (absu >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u); // >= 65536 or inf
    if (absu < 0x38800000u) {                                              // subnormal or zero
        if (absu < 0x33000000u) return static_cast<uint16_t>(sign);        // < 2^-25 -> 0
        uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
        int shift = 113 - static_cast<int>(absu >> 23) + 13; // 126 - exp + 13 ... aligned to 2^-24
        uint32_t half = 1u << (shift - 1);
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t r = mant >> shift;
        if (rem > half || (rem == half && (r & 1u))) r++;
        return static_cast<uint16_t>(sign | r);
    }
    uint32_t r = absu - 0x38000000u; // rebias exponent 127 -> 15 (112 << 23)
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;
    return static_cast<uint16_t>(sign | (r >> 13));
}

SOF_HD float f16_to_f32(uint16_t h) {
    uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return bits_f32(sign);
        float f = static_cast<float>(mant) * (1.0f / 16777216.0f); // mant * 2^-24
        return sign ? -f : f;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

} // namespace sof::core
