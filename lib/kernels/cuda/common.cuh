// Shared device helpers of the CUDA twins: the element types (T = float or bf16, bf16 stored as
// __nv_bfloat16), loads/stores through fp32, launch sizes and the stream cast.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/dtype.h"

namespace sof::kernels::cuda {

// The device type of a host element type: float -> float, core::bf16 -> __nv_bfloat16 (same
// size and bits; static_asserts below).
template <class T> struct DevType;
template <> struct DevType<float> { using type = float; };
template <> struct DevType<core::bf16> { using type = __nv_bfloat16; };
template <class T> using dev_t = typename DevType<T>::type;

static_assert(sizeof(core::bf16) == sizeof(__nv_bfloat16), "bf16 layout");

template <class T> inline dev_t<T>* dev_ptr(T* p) {
    return reinterpret_cast<dev_t<T>*>(p);
}
template <class T> inline const dev_t<T>* dev_ptr(const T* p) {
    return reinterpret_cast<const dev_t<T>*>(p);
}

__device__ __forceinline__ float to_float(float x) {
    return x;
}
// bf16 <-> fp32 through core/dtype.h, the tree's one rounding (round to nearest even, NaN kept
// quiet with its sign and top payload bits): the CUDA twins store exactly the bits the CPU twins,
// the runtime and the file readers do (__float2bfloat16_rn would agree on every non-NaN value but
// turn each NaN into 0x7fff).
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
    return core::bf16_to_f32(__bfloat16_as_ushort(x));
}
template <class D> __device__ __forceinline__ D from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) {
    return x;
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __ushort_as_bfloat16(core::f32_to_bf16(x));
}

inline cudaStream_t as_stream(void* s) {
    return static_cast<cudaStream_t>(s);
}

constexpr int kThreads = 256;

// Blocks for n elements at kThreads per block, capped (grid-stride loops cover the rest).
inline unsigned int blocks_for(size_t n, size_t cap = 65535u * 8u) {
    size_t b = (n + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    return static_cast<unsigned int>(b < cap ? b : cap);
}

} // namespace sof::kernels::cuda
