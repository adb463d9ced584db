// The GPU machine of the tensor-core attention tile code (flash_tile.cuh): inline PTX for
// mma.sync m16n8k16 bf16, ldmatrix and cp.async, the warp shuffles and barriers. nvcc only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/flash_tile.cuh"

namespace sof::kernels::cuda::flash {

struct DeviceMachine {
    unsigned char* smem_base;

    __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
    __device__ __forceinline__ unsigned char* smem() const { return smem_base; }
    __device__ __forceinline__ void sync() const { __syncthreads(); }
    __device__ __forceinline__ float shfl_xor(float v, int m) const {
        return __shfl_xor_sync(0xffffffffu, v, m);
    }
    __device__ __forceinline__ int shfl_up(int v, int d) const {
        return __shfl_up_sync(0xffffffffu, v, d);
    }
    __device__ __forceinline__ void atomic_max_shared(int* p, int v) const { atomicMax(p, v); }
    __device__ __forceinline__ void atomic_min_shared(int* p, int v) const { atomicMin(p, v); }
    __device__ __forceinline__ float exp2(float x) const { return exp2f(x); }
    __device__ __forceinline__ float log2(float x) const { return log2f(x); }

    // lo in the low 16 bits (cvt.rn.bf16x2.f32 puts its first operand in the high half, so the
    // intrinsic's (x = lo, y = hi) order is the one to use)
    __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) const {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const uint32_t*>(&v);
    }

    __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const unsigned char* p) const {
        const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a)
                     : "memory");
    }
    __device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const unsigned char* p) const {
        const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a)
                     : "memory");
    }
    // d (16 x 8 fp32) += a (16 x 16 bf16, row) b (16 x 8 bf16, col)
    __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) const {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    // 16 bytes global -> shared, asynchronous; src-size 0 writes zeros (nothing is read)
    __device__ __forceinline__ void cp_async16(unsigned char* dst, const void* src,
                                               bool valid) const {
        const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
        const int n = valid ? 16 : 0;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(n)
                     : "memory");
    }
    __device__ __forceinline__ void cp_async4(unsigned char* dst, const void* src,
                                              bool valid) const {
        const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
        const int n = valid ? 4 : 0;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(a), "l"(src), "r"(n)
                     : "memory");
    }
    __device__ __forceinline__ void cp_commit() const {
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    __device__ __forceinline__ void cp_wait_all() const {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
    template <class T> __device__ __forceinline__ T ld(const T* p) const { return *p; }
    template <class T> __device__ __forceinline__ void st(T* p, T v) const { *p = v; }
};

} // namespace sof::kernels::cuda::flash
