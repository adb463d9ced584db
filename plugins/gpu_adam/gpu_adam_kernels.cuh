// gpu_adam device code: the fused multi-tensor AdamW/Adam kernel, rollback, grad statistics.
// Arithmetic follows the scalar reference order exactly (explicit _rn intrinsics, no FMA
// contraction).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "optim/qstate.h"
#include "optim/sof_optim_abi.h"

namespace sof::gpu_adam {

constexpr int kMaxSlices = 96;   // slices per launch (the table travels in the kernel arguments)
constexpr int kThreads = 256;    // threads per block
constexpr int kChunk = 4096;     // elements per chunk; multiple of 4 * kThreads
constexpr int kMaxBlocks = 4096; // grid cap (the grid is one full wave of resident blocks)
constexpr int kNoLowp = -1;      // lowp_dtype when no low-precision copy is written

enum class Op : int { Step = 0, Rollback = 1, Stats = 2 };

// One slice with its per-slice constants, precomputed on the host in double and rounded to float.
struct SliceDesc {
    const float* p;  // (n) params in (pdt fp32; the bf16 master's pointer when pdt is bf16)
    const void* g;   // (n) grads, dtype gdt
    const void* m;   // (n) exp_avg in, format sdt
    const void* v;   // (n) exp_avg_sq in, format sdt
    float* p_out;    // (n) params out (== p in place; bf16 master: its pointer)
    void* m_out;     // (n) exp_avg out, format sdt
    void* v_out;     // (n) exp_avg_sq out, format sdt
    void* lowp;      // (n) low-precision copy of p_out, dtype ldt, or null
    const float* ms; // Q8: (ceil(n/qb)) scales of m in
    const float* vs; // Q8: scales of v in
    float* mso;      // Q8: scales of m out
    float* vso;      // Q8: scales of v out
    uint64_t seed;   // stochastic rounding of a bf16 master: Philox key
    int64_t step;    // and step
    int64_t index0;  // number of element 0 in the flat parameter space
    int64_t n;
    float scale;      // grad_scale
    float b1, b2;     // beta1, beta2
    float omb1, omb2; // 1-beta1, 1-beta2
    float eps;
    float wd;        // weight decay (0: none)
    float decay;     // 1 - lr*wd (AdamW)
    float step_size; // lr / (1 - beta1^t), or lr without bias correction
    float bc2_sqrt;  // sqrt(1 - beta2^t), or 1
    int32_t gdt;     // grad dtype (sof_dtype)
    int32_t ldt;     // lowp dtype (sof_dtype) or kNoLowp
    int32_t l2;      // 1: Adam with L2 penalty, 0: AdamW
    int32_t aligned; // 1: every pointer allows 4-wide vector access
    int32_t sdt;     // moments' format: 0 fp32, 1 bf16 (widened; new values rounded to nearest
                     // even), 3 Q8 (decoded; each block re-quantized, optim/qstate.h)
    int32_t pdt;     // master params: 0 fp32, 1 bf16 (stochastically rounded)
    int32_t qb;      // Q8: elements per scale, else 0
    int32_t chunk;   // elements per chunk: kChunk, or the largest multiple of qb up to it (Q8)
    int32_t pad;
};

// The slice needs the general kernel (q_kernel): Q8 moments or a bf16 master.
inline __host__ __device__ bool needs_q(const SliceDesc& d) {
    return d.sdt == SOF_STATE_Q8 || d.pdt == SOF_DTYPE_BF16;
}

// The slice list of one launch, passed by value as the kernel argument; Cap (1, 8 or kMaxSlices)
// keeps the argument small for short lists. chunk_start[i] = first chunk of slice i (prefix sums).
template <int Cap> struct SliceTable {
    int32_t count;
    int64_t chunk_start[Cap + 1];
    SliceDesc s[Cap];
};

// Per-block partial statistics, reduced in a fixed order by finalize_kernel.
struct Partial {
    double sumsq;
    int32_t nonfinite;
    int32_t pad;
};

// Matches sof_optim_result's layout (checked with static_assert in gpu_adam.cu).
struct ResultOut {
    double grad_sumsq;
    int32_t nonfinite;
    int32_t reserved;
};

// The tree's one rounding (core/dtype.h, host and device): round to nearest even, NaN kept.
__device__ inline float bf16_bits_to_f32(uint16_t h) {
    return sof::core::bf16_to_f32(h);
}
__device__ inline uint16_t f32_to_bf16_rne(float f) {
    return sof::core::f32_to_bf16(f);
}
__device__ inline uint16_t f32_to_f16_rne(float f) {
    return sof::core::f32_to_f16(f);
}

__device__ inline uint16_t to_lowp(float p, int ldt) {
    return ldt == 1 ? f32_to_bf16_rne(p) : f32_to_f16_rne(p);
}

__device__ inline float load_grad(const void* g, int gdt, int64_t i) {
    if (gdt == 0) return static_cast<const float*>(g)[i];
    uint16_t h = static_cast<const uint16_t*>(g)[i];
    if (gdt == 1) return bf16_bits_to_f32(h);
    return sof::core::f16_to_f32(h);
}

// Four grads starting at i (i is a multiple of 4 and the slice is aligned).
__device__ inline void load_grad4(const void* g, int gdt, int64_t i, float out[4]) {
    if (gdt == 0) {
        float4 x = *reinterpret_cast<const float4*>(static_cast<const float*>(g) + i);
        out[0] = x.x, out[1] = x.y, out[2] = x.z, out[3] = x.w;
        return;
    }
    uint2 x = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(g) + i);
    uint16_t h[4] = {static_cast<uint16_t>(x.x & 0xffffu), static_cast<uint16_t>(x.x >> 16),
                     static_cast<uint16_t>(x.y & 0xffffu), static_cast<uint16_t>(x.y >> 16)};
    for (int k = 0; k < 4; k++)
        out[k] = gdt == 1 ? bf16_bits_to_f32(h[k]) : sof::core::f16_to_f32(h[k]);
}

// Moment i of a state buffer of dtype sdt (0 fp32, 1 bf16 widened exactly).
__device__ inline float load_state(const void* x, int sdt, int64_t i) {
    if (sdt == 0) return static_cast<const float*>(x)[i];
    return bf16_bits_to_f32(static_cast<const uint16_t*>(x)[i]);
}

__device__ inline void store_state(void* x, int sdt, int64_t i, float val) {
    if (sdt == 0)
        static_cast<float*>(x)[i] = val;
    else
        static_cast<uint16_t*>(x)[i] = f32_to_bf16_rne(val);
}

// Four moments at i (aligned): fp32 float4 or bf16 uint2.
__device__ inline void load_state4(const void* x, int sdt, int64_t i, float out[4]) {
    if (sdt == 0) {
        float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
        out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
        return;
    }
    uint2 a = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(x) + i);
    out[0] = bf16_bits_to_f32(static_cast<uint16_t>(a.x & 0xffffu));
    out[1] = bf16_bits_to_f32(static_cast<uint16_t>(a.x >> 16));
    out[2] = bf16_bits_to_f32(static_cast<uint16_t>(a.y & 0xffffu));
    out[3] = bf16_bits_to_f32(static_cast<uint16_t>(a.y >> 16));
}

__device__ inline void store_state4(void* x, int sdt, int64_t i, const float in[4]) {
    if (sdt == 0) {
        __stcs(reinterpret_cast<float4*>(static_cast<float*>(x) + i),
               make_float4(in[0], in[1], in[2], in[3]));
        return;
    }
    uint32_t lo = f32_to_bf16_rne(in[0]) | (static_cast<uint32_t>(f32_to_bf16_rne(in[1])) << 16);
    uint32_t hi = f32_to_bf16_rne(in[2]) | (static_cast<uint32_t>(f32_to_bf16_rne(in[3])) << 16);
    __stcs(reinterpret_cast<uint2*>(static_cast<uint16_t*>(x) + i), make_uint2(lo, hi));
}

// One AdamW/Adam element step in the reference order. g is the raw grad; returns the scaled grad
// through gs (for the statistics).
__device__ inline void adam_elem(const SliceDesc& d, float& p, float& m, float& v, float graw,
                                 float& gs) {
    float g = __fmul_rn(graw, d.scale);
    gs = g;
    if (d.wd != 0.0f) {
        if (d.l2)
            g = __fadd_rn(g, __fmul_rn(d.wd, p));
        else
            p = __fmul_rn(p, d.decay);
    }
    m = __fadd_rn(__fmul_rn(d.b1, m), __fmul_rn(d.omb1, g));
    v = __fadd_rn(__fmul_rn(d.b2, v), __fmul_rn(__fmul_rn(d.omb2, g), g));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), d.bc2_sqrt), d.eps);
    p = __fsub_rn(p, __fdiv_rn(__fmul_rn(d.step_size, m), denom));
}

// Arithmetic inverse of adam_elem for the in-place mode (p, m, v are the stepped values).
__device__ inline void rollback_elem(const SliceDesc& d, float& p, float& m, float& v, float graw) {
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), d.bc2_sqrt), d.eps);
    p = __fadd_rn(p, __fdiv_rn(__fmul_rn(d.step_size, m), denom));
    float g = __fmul_rn(graw, d.scale);
    if (d.wd != 0.0f) {
        if (d.l2)
            g = __fadd_rn(g, __fmul_rn(d.wd, p));
        else
            p = __fdiv_rn(p, d.decay);
    }
    m = __fdiv_rn(__fsub_rn(m, __fmul_rn(d.omb1, g)), d.b1);
    v = __fdiv_rn(__fsub_rn(v, __fmul_rn(__fmul_rn(d.omb2, g), g)), d.b2);
    v = v > 0.0f ? v : 0.0f; // NaN and -0 give +0, as the twin
}

__device__ inline void accumulate(float gs, double& sumsq, int& nonfinite) {
    double gd = static_cast<double>(gs);
    sumsq = __dadd_rn(sumsq, __dmul_rn(gd, gd));
    if (!isfinite(gs)) nonfinite = 1;
}

// Processes one element at index i of slice d for operation op.
template <Op op>
__device__ inline void process_one(const SliceDesc& d, int64_t i, double& sumsq, int& nonfinite) {
    float graw = load_grad(d.g, d.gdt, i);
    if constexpr (op == Op::Stats) {
        accumulate(__fmul_rn(graw, d.scale), sumsq, nonfinite);
    } else {
        float p = d.p[i], m = load_state(d.m, d.sdt, i), v = load_state(d.v, d.sdt, i), gs;
        if constexpr (op == Op::Step) {
            adam_elem(d, p, m, v, graw, gs);
            accumulate(gs, sumsq, nonfinite);
        } else {
            rollback_elem(d, p, m, v, graw);
        }
        d.p_out[i] = p;
        store_state(d.m_out, d.sdt, i, m);
        store_state(d.v_out, d.sdt, i, v);
        if (d.lowp) static_cast<uint16_t*>(d.lowp)[i] = to_lowp(p, d.ldt);
    }
}

// Processes four elements at i (aligned, all in range).
template <Op op>
__device__ inline void process_four(const SliceDesc& d, int64_t i, double& sumsq, int& nonfinite) {
    float g[4];
    load_grad4(d.g, d.gdt, i, g);
    if constexpr (op == Op::Stats) {
        for (int k = 0; k < 4; k++)
            accumulate(__fmul_rn(g[k], d.scale), sumsq, nonfinite);
    } else {
        float4 p4 = *reinterpret_cast<const float4*>(d.p + i);
        float p[4] = {p4.x, p4.y, p4.z, p4.w};
        float m[4], v[4];
        load_state4(d.m, d.sdt, i, m);
        load_state4(d.v, d.sdt, i, v);
        for (int k = 0; k < 4; k++) {
            if constexpr (op == Op::Step) {
                float gs;
                adam_elem(d, p[k], m[k], v[k], g[k], gs);
                accumulate(gs, sumsq, nonfinite);
            } else {
                rollback_elem(d, p[k], m[k], v[k], g[k]);
            }
        }
        __stcs(reinterpret_cast<float4*>(d.p_out + i), make_float4(p[0], p[1], p[2], p[3]));
        store_state4(d.m_out, d.sdt, i, m);
        store_state4(d.v_out, d.sdt, i, v);
        if (d.lowp) {
            uint32_t lo =
                to_lowp(p[0], d.ldt) | (static_cast<uint32_t>(to_lowp(p[1], d.ldt)) << 16);
            uint32_t hi =
                to_lowp(p[2], d.ldt) | (static_cast<uint32_t>(to_lowp(p[3], d.ldt)) << 16);
            __stcs(reinterpret_cast<uint2*>(static_cast<uint16_t*>(d.lowp) + i),
                   make_uint2(lo, hi));
        }
    }
}

// Index of the slice that owns chunk c (binary search over the prefix sums).
template <int Cap> __device__ inline int find_slice(const SliceTable<Cap>& t, int64_t c) {
    int lo = 0, hi = t.count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t.chunk_start[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Fixed-order tree reduction of the block's partials; thread 0 writes partials[blockIdx.x].
__device__ inline void block_reduce(double sumsq, int nonfinite, Partial* partials) {
    __shared__ double s_sum[kThreads];
    __shared__ int s_nf[kThreads];
    s_sum[threadIdx.x] = sumsq;
    s_nf[threadIdx.x] = nonfinite;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
        if (static_cast<int>(threadIdx.x) < w) {
            s_sum[threadIdx.x] = __dadd_rn(s_sum[threadIdx.x], s_sum[threadIdx.x + w]);
            s_nf[threadIdx.x] |= s_nf[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = Partial{s_sum[0], s_nf[0], 0};
}

// Multi-tensor kernel: block b handles chunks b, b + gridDim.x, ... of the concatenated slices.
template <Op op, int Cap>
__global__ void __launch_bounds__(kThreads)
    multi_kernel(const SliceTable<Cap> t, int64_t total_chunks, Partial* partials) {
    double sumsq = 0.0;
    int nonfinite = 0;
    for (int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
        int si = find_slice(t, c);
        const SliceDesc& d = t.s[si];
        int64_t begin = (c - t.chunk_start[si]) * kChunk;
        int64_t end = begin + kChunk < d.n ? begin + kChunk : d.n;
        if (d.aligned) {
            for (int64_t i = begin + 4 * threadIdx.x; i < end; i += 4 * kThreads) {
                if (i + 4 <= end) {
                    process_four<op>(d, i, sumsq, nonfinite);
                } else {
                    for (int64_t j = i; j < end; j++)
                        process_one<op>(d, j, sumsq, nonfinite);
                }
            }
        } else {
            for (int64_t i = begin + threadIdx.x; i < end; i += kThreads)
                process_one<op>(d, i, sumsq, nonfinite);
        }
    }
    if (op != Op::Rollback && partials != nullptr) block_reduce(sumsq, nonfinite, partials);
}

// Reduces `count` partials in a fixed order into *out (adds to it when accumulate != 0).
__global__ void __launch_bounds__(kThreads)
    finalize_kernel(const Partial* partials, int count, ResultOut* out, int accumulate) {
    double sumsq = 0.0;
    int nonfinite = 0;
    for (int i = threadIdx.x; i < count; i += kThreads) {
        sumsq = __dadd_rn(sumsq, partials[i].sumsq);
        nonfinite |= partials[i].nonfinite;
    }
    __shared__ double s_sum[kThreads];
    __shared__ int s_nf[kThreads];
    s_sum[threadIdx.x] = sumsq;
    s_nf[threadIdx.x] = nonfinite;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
        if (static_cast<int>(threadIdx.x) < w) {
            s_sum[threadIdx.x] = __dadd_rn(s_sum[threadIdx.x], s_sum[threadIdx.x + w]);
            s_nf[threadIdx.x] |= s_nf[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (accumulate) {
            out->grad_sumsq = __dadd_rn(out->grad_sumsq, s_sum[0]);
            out->nonfinite |= s_nf[0];
        } else {
            out->grad_sumsq = s_sum[0];
            out->nonfinite = s_nf[0];
            out->reserved = 0;
        }
    }
}

} // namespace sof::gpu_adam
