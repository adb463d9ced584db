// gpu_adam device code for Q8 moments and bf16 master params: the general multi-tensor kernel
// (any slot format, fp32 or bf16 master) with per-block quantization in shared memory.
#pragma once

#include "gpu_adam_kernels.cuh"
#include "optim/qstate.h"

namespace sof::gpu_adam {

// Master param i as fp32 (bf16 widened exactly).
__device__ inline float q_load_param(const SliceDesc& d, int64_t i) {
    if (d.pdt == 0) return d.p[i];
    return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(d.p)[i]);
}

// Stores the new param i (bf16 master: stochastically rounded, optim::f32_to_bf16_sr keyed by
// seed, step and index0 + i); returns the stored value as fp32.
__device__ inline float q_store_param(const SliceDesc& d, int64_t i, float p) {
    if (d.pdt == 0) {
        d.p_out[i] = p;
        return p;
    }
    const uint16_t h = optim::f32_to_bf16_sr(
        p, optim::sr_bits(d.seed, d.step, static_cast<uint64_t>(d.index0 + i)));
    reinterpret_cast<uint16_t*>(d.p_out)[i] = h;
    return bf16_bits_to_f32(h);
}

// Moment i of slot (x, scales) in format sdt as fp32 (Q8: decoded times its block's scale).
__device__ inline float q_load_state(const SliceDesc& d, const void* x, const float* scales,
                                     bool is_signed, int64_t i) {
    if (d.sdt != SOF_STATE_Q8) return load_state(x, d.sdt, i);
    return optim::q_value(static_cast<const uint8_t*>(x)[i], scales[i / d.qb],
                          optim::q8_map(is_signed));
}

// Bit pattern maximum over a warp (every lane gets it).
__device__ inline uint32_t warp_max(uint32_t x) {
    for (int o = 16; o > 0; o /= 2) {
        const uint32_t y = __shfl_xor_sync(0xffffffffu, x, o);
        x = y > x ? y : x;
    }
    return x;
}

// Quantizes the staged values x[0, len) of one chunk (starting at slice element `begin`, a block
// boundary) into codes out + begin and scales sc + begin / qb: one warp per block computes the
// block's largest magnitude and its scale (optim::q_block_scale), then every thread encodes.
__device__ inline void q_quantize_chunk(const SliceDesc& d, const float* x, int64_t begin,
                                        int64_t len, bool is_signed, void* out, float* sc,
                                        float* s_inv) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t nq = (len + d.qb - 1) / d.qb;
    for (int64_t q = warp; q < nq; q += kThreads / 32) {
        const int64_t b0 = q * d.qb, b1 = b0 + d.qb < len ? b0 + d.qb : len;
        uint32_t amax = 0;
        for (int64_t j = b0 + lane; j < b1; j += 32) {
            const uint32_t a = core::f32_bits(x[j]) & 0x7fffffffu;
            amax = a > amax ? a : amax;
        }
        amax = warp_max(amax);
        if (lane == 0) {
            const optim::QBlockScale bs = optim::q_block_scale(amax);
            sc[begin / d.qb + q] = bs.scale;
            s_inv[q] = bs.ok ? bs.inv : __uint_as_float(0xffffffffu); // NaN: code 0
        }
    }
    __syncthreads();
    const optim::QMap map = optim::q8_map(is_signed);
    uint8_t* codes = static_cast<uint8_t*>(out) + begin;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) {
        const float inv = s_inv[j / d.qb];
        codes[j] = inv == inv ? optim::q_encode(__fmul_rn(x[j], inv), map) : uint8_t{0};
    }
    __syncthreads();
}

// The general kernel: chunk c of the concatenated slices per block iteration (grid-stride), every
// element in the reference's order (adam_elem), params through q_store_param; fp32/bf16 moments
// stored directly, Q8 moments staged in shared memory and quantized per chunk.
template <int Cap>
__global__ void __launch_bounds__(kThreads)
    q_kernel(const SliceTable<Cap> t, int64_t total_chunks, Partial* partials) {
    // a chunk holds whole Q8 blocks of every size check_slice allows (powers of two from
    // kQBlockMin to kQBlockMax), at most kChunk / kQBlockMin of them
    static_assert(kChunk % optim::kQBlockMax == 0 && kChunk >= optim::kQBlockMax);
    __shared__ float s_m[kChunk], s_v[kChunk];
    __shared__ float s_inv[kChunk / optim::kQBlockMin];
    double sumsq = 0.0;
    int nonfinite = 0;
    for (int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
        const int si = find_slice(t, c);
        const SliceDesc& d = t.s[si];
        const int64_t begin = (c - t.chunk_start[si]) * d.chunk;
        const int64_t end = begin + d.chunk < d.n ? begin + d.chunk : d.n;
        const bool q8 = d.sdt == SOF_STATE_Q8;
        for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
            float p = q_load_param(d, i);
            float m = q_load_state(d, d.m, d.ms, true, i);
            float v = q_load_state(d, d.v, d.vs, false, i);
            float gs;
            adam_elem(d, p, m, v, load_grad(d.g, d.gdt, i), gs);
            accumulate(gs, sumsq, nonfinite);
            const float stored = q_store_param(d, i, p);
            if (d.lowp) static_cast<uint16_t*>(d.lowp)[i] = to_lowp(stored, d.ldt);
            if (q8) {
                s_m[i - begin] = m;
                s_v[i - begin] = v;
            } else {
                store_state(d.m_out, d.sdt, i, m);
                store_state(d.v_out, d.sdt, i, v);
            }
        }
        if (q8) { // uniform over the block: every thread steps the same chunk
            __syncthreads();
            q_quantize_chunk(d, s_m, begin, end - begin, true, d.m_out, d.mso, s_inv);
            q_quantize_chunk(d, s_v, begin, end - begin, false, d.v_out, d.vso, s_inv);
        }
    }
    if (partials != nullptr) block_reduce(sumsq, nonfinite, partials);
}

} // namespace sof::gpu_adam
