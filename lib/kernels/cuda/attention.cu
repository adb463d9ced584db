// CUDA twin of attention.h: FlashAttention-2 tiles in shared memory, lse saved; the backward is
// deterministic (no atomics) and nothing is O(T^2). Two kernels: for bf16 with head dim 64 or
// 128 the tensor-core kernel (attention_tc.cu, flash_*.cuh: mma.sync bf16, fp32 accumulation);
// for everything else (fp32, any head dim up to 256, KV-cache decoding) the CUDA-core kernel
// below (fp32 math on T = float or bf16). AttnArgs::kernel forces either (attention.h).
//
// Why our own kernels rather than cuDNN's fused attention (its graph API, installed with CUDA):
// - cuDNN's flash attention takes fp16/bf16 only; the op must also run in fp32, the type in which
//   the CUDA twin is compared with the CPU twin in the op driver.
// - packed documents: our segments (a run of equal ids is a document, any number per row) would
//   need cuDNN's ragged-offset layout or a materialized mask/bias tensor; a mask tensor is T x T.
// - the graph API is reached through cudnn-frontend (not a dependency of ours) or a chain of
//   some twenty backend descriptors per shape, and its backward is deterministic only as an
//   opt-in per cuDNN version; ours has one code path we control and test against the CPU twin.
//
// The CUDA-core kernel (Bc = 32 keys per tile, one per lane of a warp; 4 warps per block; head
// dim hd at run time, the per-lane register arrays sized for P = ceil(hd / 32) in {1,2,3,4,8}):
// - forward and dq: a block per (query tile of kBr rows, head, batch row); each warp owns
//   kBr/4 rows; lane j scores key j of the tile, the warp reduces max and sum, and each lane
//   accumulates dims lane, lane + 32, ... (< hd) of o or dq in registers.
// - dk/dv: a block per (key tile of 32 keys, kv head, batch row), looping over the query heads of
//   its group and the query rows that see the tile; lane j owns key j, warp w a quarter of the
//   dims.
// - delta: a warp per (b, t, h) row (also the tensor-core backward's first pass).
// Shared memory is dynamic (sized from hd; over 48 KiB the kernel's limit is raised per launch).
#include "kernels/attention.h"
#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"

#include <cmath>
#include <type_traits>

namespace sof::kernels::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kBlock = kWarps * 32;
constexpr int kBc = 32; // keys per tile: one per lane
constexpr int kMaxHeadDim = 256;
constexpr unsigned kFull = 0xffffffffu;

// P: dims per lane (fwd, dq) = ceil(hd / 32), rounded up to 1, 2, 3, 4 or 8.
template <int P> struct Cfg {
    static_assert(P == 1 || P == 2 || P == 3 || P == 4 || P == 8, "dims per lane");
    static constexpr int kRowsPerWarp = P <= 2 ? 4 : 2; // keeps shared memory small
    static constexpr int kBr = kWarps * kRowsPerWarp;   // query rows per tile
    static constexpr int kDimsPerWarp = 8 * P;          // dk/dv dims per thread (>= hd / 4)
};

// What every kernel needs besides the pointers.
struct Dims {
    int B, T, NH, group, hd;
    int kld; // row stride of the key/value tiles in shared memory: hd | 1 (odd: lane j reading
             // row j hits bank j)
    float scale;
    size_t ldq, ldk, ldv, ldo;
    int q_begin;              // forward: first query row computed
    int window;               // sliding window W (0: none)
    const float* sinks;       // (NH) sink logits or null
    detail::AttnDropout drop; // probability dropout (inactive: p = 0)
};

__device__ __forceinline__ size_t row_of(const Dims& g, int b, int t) {
    return static_cast<size_t>(b) * g.T + t;
}
__device__ __forceinline__ size_t stat_of(const Dims& g, int b, int h, int t) {
    return (static_cast<size_t>(b) * g.NH + h) * g.T + t;
}

// Butterfly reductions: every lane ends with the same bits (each step adds a pair both ways).
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(kFull, v, o);
    return v;
}

// First position of the run of equal ids that holds t0 (its document's start), not below floor;
// called by every thread of the block, returns the same value to all. Reads kBlock ids per step
// back from t0, so its steps are as many as the keys it then visits / kBlock: never the
// bottleneck.
__device__ int run_start(const int* seg, int t0, int floor, int* scratch) {
    const int id = seg[t0];
    int hi = t0; // [hi, t0] is known to be in the run
    while (hi > floor) {
        if (threadIdx.x == 0) *scratch = -1;
        __syncthreads();
        const int p = hi - 1 - static_cast<int>(threadIdx.x);
        if (p >= floor && seg[p] != id) atomicMax(scratch, p);
        __syncthreads();
        const int found = *scratch;
        __syncthreads(); // all have read it before thread 0 resets it
        if (found >= 0) return found + 1;
        hi -= kBlock;
    }
    return floor;
}

// The first key of row t0 (not below floor): its document's start, with a window W not below
// t0 - W + 1. Every thread calls it.
__device__ int first_key(const Dims& g, const int* seg, int t0, int floor, int* scratch) {
    if (g.window > 0) floor = max(floor, t0 - g.window + 1);
    return seg ? run_start(seg, t0, floor, scratch) : floor;
}

// rs[i] = first key row t0+i sees, for i < nr, given s = that of row t0 (thread 0 only): the
// document start (s carried, or the row where the id changes), with a window W not below
// t0+i-W+1.
__device__ void fill_row_starts(int* rs, const int* seg, int t0, int nr, int s, int window) {
    for (int i = 0; i < nr; i++) {
        const int t = t0 + i;
        if (seg && i > 0 && seg[t] != seg[t - 1]) s = t;
        rs[i] = window > 0 ? max(s, t - window + 1) : s;
    }
}

// The dropout factor of probability (b, h, t, key c): the mask's scale or 0 (1 when inactive).
__device__ __forceinline__ float drop_factor(const Dims& g, int b, int h, int t, int c) {
    return g.drop.mask.factor(g.drop.row(b, h, t) + static_cast<uint64_t>(c));
}

// Rows [t0, t0+nr) of head h's dims of a strided (rows, ld) tensor into shared floats (row stride
// dld >= hd).
template <class D>
__device__ void load_rows(float* dst, int dld, const D* src, size_t ld, const Dims& g, int b,
                          int t0, int nr, int h) {
    for (int i = threadIdx.x; i < nr * g.hd; i += kBlock) {
        const int r = i / g.hd, d = i % g.hd;
        dst[r * dld + d] =
            to_float(src[row_of(g, b, t0 + r) * ld + static_cast<size_t>(h) * g.hd + d]);
    }
}

__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
#pragma unroll 8
    for (int d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

// Dynamic shared memory of the three kernels (floats, then ints), from hd.
struct FwdSmem {
    int kBr, hd, kld;
    __host__ __device__ size_t qs() const { return 0; }
    __host__ __device__ size_t ks() const { return static_cast<size_t>(kBr) * hd; }
    __host__ __device__ size_t vs() const { return ks() + static_cast<size_t>(kBc) * kld; }
    __host__ __device__ size_t ints() const { return vs() + static_cast<size_t>(kBc) * kld; }
    __host__ __device__ size_t bytes() const { return (ints() + kBr + 1) * 4; }
};
struct KvSmem {
    int kBr, hd, kld;
    __host__ __device__ size_t ks() const { return 0; }
    __host__ __device__ size_t vs() const { return static_cast<size_t>(kBc) * kld; }
    __host__ __device__ size_t qs() const { return vs() + static_cast<size_t>(kBc) * kld; }
    __host__ __device__ size_t dos() const { return qs() + static_cast<size_t>(kBr) * hd; }
    __host__ __device__ size_t ps() const { return dos() + static_cast<size_t>(kBr) * hd; }
    __host__ __device__ size_t dss() const { return ps() + static_cast<size_t>(kBr) * kBc; }
    __host__ __device__ size_t ls() const { return dss() + static_cast<size_t>(kBr) * kBc; }
    __host__ __device__ size_t ds() const { return ls() + kBr; }
    __host__ __device__ size_t ints() const { return ds() + kBr; }
    __host__ __device__ size_t bytes() const { return (ints() + kBr) * 4; }
};
struct DqSmem {
    int kBr, hd, kld;
    __host__ __device__ size_t qs() const { return 0; }
    __host__ __device__ size_t dos() const { return static_cast<size_t>(kBr) * hd; }
    __host__ __device__ size_t ks() const { return dos() + static_cast<size_t>(kBr) * hd; }
    __host__ __device__ size_t vs() const { return ks() + static_cast<size_t>(kBc) * kld; }
    __host__ __device__ size_t ls() const { return vs() + static_cast<size_t>(kBc) * kld; }
    __host__ __device__ size_t ds() const { return ls() + kBr; }
    __host__ __device__ size_t ints() const { return ds() + kBr; }
    __host__ __device__ size_t bytes() const { return (ints() + kBr + 1) * 4; }
};

// ---------------------------------------------------------------------------------- forward

template <int P, class D>
__global__ void __launch_bounds__(kBlock) fwd_kernel(D* out, float* lse, const D* q, const D* k,
                                                     const D* v, const int* segments, Dims g) {
    using C = Cfg<P>;
    extern __shared__ float smem[];
    const FwdSmem L{C::kBr, g.hd, g.kld};
    float* qs = smem + L.qs();
    float* ks = smem + L.ks();
    float* vs = smem + L.vs();
    int* rs = reinterpret_cast<int*>(smem + L.ints());
    int* scratch = rs + C::kBr;
    const int b = blockIdx.z, h = blockIdx.y, t0 = g.q_begin + blockIdx.x * C::kBr;
    const int nr = min(C::kBr, g.T - t0), last = t0 + nr - 1, kh = h / g.group, hd = g.hd;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* seg = segments ? segments + static_cast<size_t>(b) * g.T : nullptr;

    load_rows(qs, hd, q, g.ldq, g, b, t0, nr, h);
    const int start0 = first_key(g, seg, t0, 0, scratch);
    if (threadIdx.x == 0) fill_row_starts(rs, seg, t0, nr, start0, g.window);

    float o[C::kRowsPerWarp][P], m[C::kRowsPerWarp], l[C::kRowsPerWarp];
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
#pragma unroll
        for (int e = 0; e < P; e++)
            o[rr][e] = 0.0f;
    }
    for (int c0 = start0; c0 <= last; c0 += kBc) {
        const int nc = min(kBc, last + 1 - c0);
        __syncthreads(); // the previous tile is read (and qs, rs are written)
        load_rows(ks, g.kld, k, g.ldk, g, b, c0, nc, kh);
        load_rows(vs, g.kld, v, g.ldv, g, b, c0, nc, kh);
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
            const int i = warp * C::kRowsPerWarp + rr; // warp-uniform
            if (i >= nr) continue;
            const int t = t0 + i, c = c0 + lane;
            float s = -INFINITY;
            if (lane < nc && c <= t && c >= rs[i])
                s = dot(qs + i * hd, ks + lane * g.kld, hd) * g.scale;
            const float mx = fmaxf(m[rr], warp_max(s));
            if (mx == -INFINITY) continue; // nothing seen by this row yet (warp-uniform)
            const float p = s == -INFINITY ? 0.0f : expf(s - mx);
            const float alpha = expf(m[rr] - mx); // 0 when m was -inf
            l[rr] = l[rr] * alpha + warp_sum(p);
            m[rr] = mx;
#pragma unroll
            for (int e = 0; e < P; e++)
                o[rr][e] *= alpha;
            // dropout: l sums every probability, P V the kept ones (scaled)
            const float pz = g.drop.mask.active() && p != 0.0f ? p * drop_factor(g, b, h, t, c) : p;
            for (int j = 0; j < nc; j++) {
                const float pj = __shfl_sync(kFull, pz, j);
#pragma unroll
                for (int e = 0; e < P; e++)
                    if (lane + 32 * e < hd) o[rr][e] += pj * vs[j * g.kld + lane + 32 * e];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
        const int i = warp * C::kRowsPerWarp + rr;
        if (i >= nr) continue;
        // every row sees at least itself: l >= 1; a sink joins the denominator
        float mf = m[rr], lf = l[rr], f = 1.0f;
        if (g.sinks) {
            const float z = g.sinks[h], m2 = fmaxf(mf, z);
            f = expf(mf - m2);
            lf = lf * f + expf(z - m2);
            mf = m2;
        }
        const float inv = f / lf;
        D* dst = out + row_of(g, b, t0 + i) * g.ldo + static_cast<size_t>(h) * hd;
#pragma unroll
        for (int e = 0; e < P; e++)
            if (lane + 32 * e < hd) dst[lane + 32 * e] = from_float<D>(o[rr][e] * inv);
        if (lane == 0) lse[stat_of(g, b, h, t0 + i)] = mf + logf(lf);
    }
}

// ---------------------------------------------------------------------------------- backward

// delta[b,h,t] = sum_d dout * out (a warp per row).
template <class D>
__global__ void __launch_bounds__(kBlock)
    delta_kernel(float* delta, const D* dout, const D* out, Dims g) {
    const size_t rows = static_cast<size_t>(g.B) * g.T * g.NH;
    const size_t warps = static_cast<size_t>(gridDim.x) * kWarps;
    const int lane = threadIdx.x % 32;
    for (size_t r = blockIdx.x * static_cast<size_t>(kWarps) + threadIdx.x / 32; r < rows;
         r += warps) {
        const int h = static_cast<int>(r % g.NH);
        const size_t bt = r / g.NH; // b*T + t
        const D* dd = dout + bt * g.ldo + static_cast<size_t>(h) * g.hd;
        const D* o = out + bt * g.ldo + static_cast<size_t>(h) * g.hd;
        float s = 0.0f;
        for (int d = lane; d < g.hd; d += 32)
            s += to_float(dd[d]) * to_float(o[d]);
        s = warp_sum(s);
        const int b = static_cast<int>(bt / g.T), t = static_cast<int>(bt % g.T);
        if (lane == 0) delta[stat_of(g, b, h, t)] = s;
    }
}

// dsinks[h] += -sum over (b, t) of exp(sinks[h] - lse) * delta: a block per head, thread j
// summing rows j, j + kBlock, ... in order, then the warps' butterflies and the warps in order
// (a fixed order: the same bits on every run).
__global__ void __launch_bounds__(kBlock)
    dsinks_kernel(float* dsinks, const float* sinks, const float* lse, const float* delta, Dims g) {
    __shared__ float part[kWarps];
    const int h = blockIdx.x;
    const size_t n = static_cast<size_t>(g.B) * g.T;
    const float z = sinks[h];
    float acc = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += kBlock) {
        const size_t b = i / g.T, t = i % g.T;
        const size_t j = (b * g.NH + h) * g.T + t;
        acc += expf(z - lse[j]) * delta[j];
    }
    acc = warp_sum(acc);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int w = 0; w < kWarps; w++)
            s += part[w];
        dsinks[h] -= s;
    }
}

// dk, dv of the keys [c0, c0+32) of kv head kh: over the query heads of the group and the query
// rows from c0 on while they still see the tile (starts clamped to c0: keys below do not matter).
template <int P, class D>
__global__ void __launch_bounds__(kBlock)
    dkdv_kernel(D* dk_out, D* dv_out, size_t lddk, size_t lddv, const D* q, const D* k, const D* v,
                const D* dout, const float* lse, const float* delta, const int* segments, Dims g) {
    using C = Cfg<P>;
    extern __shared__ float smem[];
    const KvSmem L{C::kBr, g.hd, g.kld};
    float* ks = smem + L.ks();
    float* vs = smem + L.vs();
    float* qs = smem + L.qs();
    float* dos = smem + L.dos();
    float* ps = smem + L.ps();
    float* dss = smem + L.dss();
    float* Ls = smem + L.ls();
    float* Ds = smem + L.ds();
    int* rs = reinterpret_cast<int*>(smem + L.ints());
    const int b = blockIdx.z, kh = blockIdx.y, c0 = blockIdx.x * kBc, hd = g.hd;
    const int nc = min(kBc, g.T - c0), clast = c0 + nc - 1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* seg = segments ? segments + static_cast<size_t>(b) * g.T : nullptr;

    load_rows(ks, g.kld, k, g.ldk, g, b, c0, nc, kh);
    load_rows(vs, g.kld, v, g.ldv, g, b, c0, nc, kh);
    float dk[C::kDimsPerWarp], dv[C::kDimsPerWarp];
#pragma unroll
    for (int e = 0; e < C::kDimsPerWarp; e++)
        dk[e] = dv[e] = 0.0f;
    const int dpw = (hd + kWarps - 1) / kWarps; // dims of each warp (<= kDimsPerWarp)
    const int d0 = warp * dpw, dn = max(0, min(dpw, hd - d0));

    for (int h = kh * g.group; h < (kh + 1) * g.group; h++) {
        int s_prev = c0; // thread 0: clamped start of the row before the tile
        for (int t0 = c0; t0 < g.T; t0 += C::kBr) {
            const int nr = min(C::kBr, g.T - t0);
            __syncthreads(); // the previous tile's shared data is read
            load_rows(qs, hd, q, g.ldq, g, b, t0, nr, h);
            load_rows(dos, hd, dout, g.ldo, g, b, t0, nr, h);
            for (int i = threadIdx.x; i < nr; i += kBlock) {
                Ls[i] = lse[stat_of(g, b, h, t0 + i)];
                Ds[i] = delta[stat_of(g, b, h, t0 + i)];
            }
            if (threadIdx.x == 0) {
                int s = s_prev;
                if (t0 > c0 && seg && seg[t0] != seg[t0 - 1]) s = t0;
                fill_row_starts(rs, seg, t0, nr, s, g.window);
                s_prev = rs[nr - 1];
            }
            __syncthreads();
            // this and later rows are in later documents or past the window's reach (uniform)
            if (rs[0] > clast) break;
            // P Z and dS of the (nr x 32) tile: warps split the rows, lane j is key c0+j
            for (int i = warp; i < nr; i += kWarps) {
                const int t = t0 + i, c = c0 + lane;
                float p = 0.0f, ds = 0.0f;
                if (lane < nc && c <= t && c >= rs[i]) {
                    const float z = drop_factor(g, b, h, t, c);
                    p = expf(dot(qs + i * hd, ks + lane * g.kld, hd) * g.scale - Ls[i]);
                    ds = p * (dot(dos + i * hd, vs + lane * g.kld, hd) * z - Ds[i]) * g.scale;
                    p *= z;
                }
                ps[i * kBc + lane] = p;
                dss[i * kBc + lane] = ds;
            }
            __syncthreads();
            // dv[j] += P^T dout, dk[j] += dS^T q (lane j, this warp's dims), rows in order
            for (int i = 0; i < nr; i++) {
                const float p = ps[i * kBc + lane], ds = dss[i * kBc + lane];
#pragma unroll
                for (int e = 0; e < C::kDimsPerWarp; e++) {
                    if (e < dn) {
                        dv[e] += p * dos[i * hd + d0 + e];
                        dk[e] += ds * qs[i * hd + d0 + e];
                    }
                }
            }
        }
    }
    if (lane < nc) {
        const size_t r = row_of(g, b, c0 + lane);
        D* dkr = dk_out + r * lddk + static_cast<size_t>(kh) * hd + d0;
        D* dvr = dv_out + r * lddv + static_cast<size_t>(kh) * hd + d0;
#pragma unroll
        for (int e = 0; e < C::kDimsPerWarp; e++) {
            if (e < dn) {
                dkr[e] = from_float<D>(dk[e]);
                dvr[e] = from_float<D>(dv[e]);
            }
        }
    }
}

// dq of a query tile: over the key tiles it sees, as the forward.
template <int P, class D>
__global__ void __launch_bounds__(kBlock)
    dq_kernel(D* dq_out, size_t lddq, const D* q, const D* k, const D* v, const D* dout,
              const float* lse, const float* delta, const int* segments, Dims g) {
    using C = Cfg<P>;
    extern __shared__ float smem[];
    const DqSmem L{C::kBr, g.hd, g.kld};
    float* qs = smem + L.qs();
    float* dos = smem + L.dos();
    float* ks = smem + L.ks();
    float* vs = smem + L.vs();
    float* Ls = smem + L.ls();
    float* Ds = smem + L.ds();
    int* rs = reinterpret_cast<int*>(smem + L.ints());
    int* scratch = rs + C::kBr;
    const int b = blockIdx.z, h = blockIdx.y, t0 = blockIdx.x * C::kBr, hd = g.hd;
    const int nr = min(C::kBr, g.T - t0), last = t0 + nr - 1, kh = h / g.group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* seg = segments ? segments + static_cast<size_t>(b) * g.T : nullptr;

    load_rows(qs, hd, q, g.ldq, g, b, t0, nr, h);
    load_rows(dos, hd, dout, g.ldo, g, b, t0, nr, h);
    for (int i = threadIdx.x; i < nr; i += kBlock) {
        Ls[i] = lse[stat_of(g, b, h, t0 + i)];
        Ds[i] = delta[stat_of(g, b, h, t0 + i)];
    }
    const int start0 = first_key(g, seg, t0, 0, scratch);
    if (threadIdx.x == 0) fill_row_starts(rs, seg, t0, nr, start0, g.window);

    float dq[C::kRowsPerWarp][P];
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++)
#pragma unroll
        for (int e = 0; e < P; e++)
            dq[rr][e] = 0.0f;
    for (int c0 = start0; c0 <= last; c0 += kBc) {
        const int nc = min(kBc, last + 1 - c0);
        __syncthreads();
        load_rows(ks, g.kld, k, g.ldk, g, b, c0, nc, kh);
        load_rows(vs, g.kld, v, g.ldv, g, b, c0, nc, kh);
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
            const int i = warp * C::kRowsPerWarp + rr; // warp-uniform
            if (i >= nr) continue;
            const int t = t0 + i, c = c0 + lane;
            float ds = 0.0f;
            if (lane < nc && c <= t && c >= rs[i]) {
                const float z = drop_factor(g, b, h, t, c);
                const float p = expf(dot(qs + i * hd, ks + lane * g.kld, hd) * g.scale - Ls[i]);
                ds = p * (dot(dos + i * hd, vs + lane * g.kld, hd) * z - Ds[i]) * g.scale;
            }
            for (int j = 0; j < nc; j++) {
                const float dsj = __shfl_sync(kFull, ds, j);
#pragma unroll
                for (int e = 0; e < P; e++)
                    if (lane + 32 * e < hd) dq[rr][e] += dsj * ks[j * g.kld + lane + 32 * e];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
        const int i = warp * C::kRowsPerWarp + rr;
        if (i >= nr) continue;
        D* dst = dq_out + row_of(g, b, t0 + i) * lddq + static_cast<size_t>(h) * hd;
#pragma unroll
        for (int e = 0; e < P; e++)
            if (lane + 32 * e < hd) dst[lane + 32 * e] = from_float<D>(dq[rr][e]);
    }
}

// ---------------------------------------------------------------------------------- host side

template <class T> Dims dims_of(const AttnArgs<T>& a, const char* op) {
    detail::check_attention_args(a.B, a.T, a.num_heads, a.num_kv_heads, a.head_dim, op);
    detail::check_attention_layout(a.ldq, a.ldk, a.ldv, a.ldo, a.num_heads, a.num_kv_heads,
                                   a.head_dim, a.q_begin, a.T, op);
    const detail::AttnDropout drop = detail::check_attention_features(
        a.window, a.dropout, a.dropout_key, a.B, a.T, a.num_heads, op);
    if (a.B > 65535 || a.num_heads > 65535)
        SOF_FAIL(Config, "%s (CUDA): B=%d and num_heads=%d must be at most 65535 (grid limits)", op,
                 a.B, a.num_heads);
    if (a.head_dim > kMaxHeadDim)
        SOF_FAIL(Config,
                 "%s (CUDA): head_dim=%d is not supported; the CUDA kernels take head dims up to "
                 "%d (their per-lane registers and shared memory are sized for it in "
                 "lib/kernels/cuda/attention.cu)",
                 op, a.head_dim, kMaxHeadDim);
    return Dims{a.B,
                a.T,
                a.num_heads,
                a.num_heads / a.num_kv_heads,
                a.head_dim,
                a.head_dim | 1,
                1.0f / std::sqrt(static_cast<float>(a.head_dim)),
                a.ldq,
                a.ldk,
                a.ldv,
                a.ldo,
                a.q_begin,
                a.window,
                a.sinks,
                drop};
}

unsigned int ceil_div(int n, int d) {
    return static_cast<unsigned int>((n + d - 1) / d);
}

// Dynamic shared memory above 48 KiB needs the kernel's limit raised (each launch: no state
// kept between calls).
template <class K> void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        SOF_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
}

template <int P, class T>
void launch_forward(T* out, float* lse, const AttnArgs<T>& a, const Dims& g, cudaStream_t s) {
    using C = Cfg<P>;
    const size_t smem = FwdSmem{C::kBr, g.hd, g.kld}.bytes();
    auto kernel = fwd_kernel<P, dev_t<T>>;
    allow_smem(kernel, smem);
    const dim3 grid(ceil_div(a.T - a.q_begin, C::kBr), a.num_heads, a.B);
    kernel<<<grid, kBlock, smem, s>>>(dev_ptr(out), lse, dev_ptr(a.q), dev_ptr(a.k), dev_ptr(a.v),
                                      a.segments, g);
    SOF_CHECK_CUDA(cudaGetLastError());
}

template <class T>
void launch_delta(float* delta, const T* dout, const T* out, const AttnArgs<T>& a, const Dims& g,
                  cudaStream_t s) {
    const size_t rows = static_cast<size_t>(a.B) * a.T * a.num_heads;
    const size_t want = (rows + kWarps - 1) / kWarps; // a warp per row, grid-stride past the cap
    const unsigned int dblocks = static_cast<unsigned int>(want < 65535u * 8u ? want : 65535u * 8u);
    delta_kernel<<<dblocks, kBlock, 0, s>>>(delta, dev_ptr(dout), dev_ptr(out), g);
    SOF_CHECK_CUDA(cudaGetLastError());
}

// dsinks from lse and delta (after the delta pass on the stream); both kernels' backward.
void launch_dsinks(float* dsinks, const float* sinks, const float* lse, const float* delta,
                   const Dims& g, cudaStream_t s) {
    dsinks_kernel<<<static_cast<unsigned int>(g.NH), kBlock, 0, s>>>(dsinks, sinks, lse, delta, g);
    SOF_CHECK_CUDA(cudaGetLastError());
}

template <int P, class T>
void launch_backward(const AttnGrads<T>& d, const T* dout, const float* lse, float* delta,
                     const AttnArgs<T>& a, const Dims& g, cudaStream_t s) {
    using C = Cfg<P>;
    const size_t kv_smem = KvSmem{C::kBr, g.hd, g.kld}.bytes();
    auto kv = dkdv_kernel<P, dev_t<T>>;
    allow_smem(kv, kv_smem);
    const dim3 kv_grid(ceil_div(a.T, kBc), a.num_kv_heads, a.B);
    kv<<<kv_grid, kBlock, kv_smem, s>>>(dev_ptr(d.k), dev_ptr(d.v), d.ldk, d.ldv, dev_ptr(a.q),
                                        dev_ptr(a.k), dev_ptr(a.v), dev_ptr(dout), lse, delta,
                                        a.segments, g);
    SOF_CHECK_CUDA(cudaGetLastError());
    const size_t q_smem = DqSmem{C::kBr, g.hd, g.kld}.bytes();
    auto qk = dq_kernel<P, dev_t<T>>;
    allow_smem(qk, q_smem);
    const dim3 q_grid(ceil_div(a.T, C::kBr), a.num_heads, a.B);
    qk<<<q_grid, kBlock, q_smem, s>>>(dev_ptr(d.q), d.ldq, dev_ptr(a.q), dev_ptr(a.k), dev_ptr(a.v),
                                      dev_ptr(dout), lse, delta, a.segments, g);
    SOF_CHECK_CUDA(cudaGetLastError());
}

// The per-lane register size P of the CUDA-core kernels for head dim hd (<= kMaxHeadDim).
int lanes_per_dim(int hd) {
    const int p = (hd + 31) / 32;
    return p <= 4 ? p : 8;
}

// Whether the tensor-core kernel runs a (AttnArgs::kernel, attention_tc_refusal); throws when it
// was required and cannot.
template <class T> bool use_tensor_cores(const AttnArgs<T>& a, const char* op) {
    if (a.kernel == AttnKernel::CudaCores) return false;
    const char* why = "fp32 activations (it is a bf16 kernel)";
    if constexpr (std::is_same_v<T, core::bf16>) why = attention_tc_refusal(a);
    if (!why) return true;
    if (a.kernel == AttnKernel::TensorCores)
        SOF_FAIL(Config,
                 "%s (CUDA): the tensor-core kernel was required (AttnKernel::TensorCores) but "
                 "does not run head_dim=%d q_begin=%d: %s",
                 op, a.head_dim, a.q_begin, why);
    return false;
}

} // namespace

// The kernels are ordered on the stream (delta, then dk/dv, then dq); each output element is
// written by one thread after a fixed-order sum: the same bits on every run.
template <class T> void attention_forward(T* out, float* lse, const AttnArgs<T>& a, void* stream) {
    const char* op = "attention_forward";
    const Dims g = dims_of(a, op);
    const bool tc = use_tensor_cores(a, op);
    if (a.B == 0 || a.T == a.q_begin) return;
    const cudaStream_t s = as_stream(stream);
    if constexpr (std::is_same_v<T, core::bf16>) {
        if (tc) {
            attention_tc_forward(out, lse, a, s);
            return;
        }
    }
    switch (lanes_per_dim(a.head_dim)) {
    case 1:
        launch_forward<1>(out, lse, a, g, s);
        break;
    case 2:
        launch_forward<2>(out, lse, a, g, s);
        break;
    case 3:
        launch_forward<3>(out, lse, a, g, s);
        break;
    case 4:
        launch_forward<4>(out, lse, a, g, s);
        break;
    default:
        launch_forward<8>(out, lse, a, g, s);
    }
}

template <class T>
void attention_backward(const AttnGrads<T>& d, const T* dout, const T* out, const float* lse,
                        float* delta, const AttnArgs<T>& a, void* stream) {
    const char* op = "attention_backward";
    const Dims g = dims_of(a, op);
    if (a.q_begin != 0)
        SOF_FAIL(Internal, "%s: q_begin = %d (the backward runs every row)", op, a.q_begin);
    const bool tc = use_tensor_cores(a, op);
    if (a.B == 0 || a.T == 0) return;
    const cudaStream_t s = as_stream(stream);
    launch_delta(delta, dout, out, a, g, s);
    if (a.sinks && d.dsinks) launch_dsinks(d.dsinks, a.sinks, lse, delta, g, s);
    if constexpr (std::is_same_v<T, core::bf16>) {
        if (tc) {
            attention_tc_backward(d, dout, lse, delta, a, s);
            return;
        }
    }
    switch (lanes_per_dim(a.head_dim)) {
    case 1:
        launch_backward<1>(d, dout, lse, delta, a, g, s);
        break;
    case 2:
        launch_backward<2>(d, dout, lse, delta, a, g, s);
        break;
    case 3:
        launch_backward<3>(d, dout, lse, delta, a, g, s);
        break;
    case 4:
        launch_backward<4>(d, dout, lse, delta, a, g, s);
        break;
    default:
        launch_backward<8>(d, dout, lse, delta, a, g, s);
    }
}

template void attention_forward<float>(float*, float*, const AttnArgs<float>&, void*);
template void attention_forward<core::bf16>(core::bf16*, float*, const AttnArgs<core::bf16>&,
                                            void*);
template void attention_backward<float>(const AttnGrads<float>&, const float*, const float*,
                                        const float*, float*, const AttnArgs<float>&, void*);
template void attention_backward<core::bf16>(const AttnGrads<core::bf16>&, const core::bf16*,
                                             const core::bf16*, const float*, float*,
                                             const AttnArgs<core::bf16>&, void*);

} // namespace sof::kernels::cuda
