// CUDA twin of attention.h: FlashAttention-2 tiles in shared memory, fp32 math (T = float or bf16
// in and out), lse saved; the backward is deterministic (no atomics) and nothing is O(T^2).
//
// Why our own kernels rather than cuDNN's fused attention (its graph API, installed with CUDA):
// - cuDNN's flash attention takes fp16/bf16 only; the op must also run in fp32, the type in which
//   the CUDA twin is compared with the CPU twin in the op driver.
// - packed documents: our segments (a run of equal ids is a document, any number per row) would
//   need cuDNN's ragged-offset layout or a materialized mask/bias tensor; a mask tensor is T x T.
// - the graph API is reached through cudnn-frontend (not a dependency of ours) or a chain of
//   some twenty backend descriptors per shape, and its backward is deterministic only as an
//   opt-in per cuDNN version; ours has one code path we control and test against the CPU twin.
// The cost: these kernels use the CUDA cores, not the tensor cores (a bf16 mma path is the next
// step for speed; the layout and the passes below stay the same).
//
// Layout of the work (Bc = 32 keys per tile, one per lane of a warp; 4 warps per block):
// - forward and dq: a block per (query tile of kBr rows, head, batch row); each warp owns
//   kBr/4 rows; lane j scores key j of the tile, the warp reduces max and sum, and each lane
//   accumulates HD/32 output dims (o or dq) in registers.
// - dk/dv: a block per (key tile of 32 keys, kv head, batch row), looping over the query heads of
//   its group and the query rows that see the tile; lane j owns key j, warp w a quarter of the
//   dims.
// - delta: a warp per (b, t, h) row.
#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"

#include <cmath>

namespace sof::kernels::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kBlock = kWarps * 32;
constexpr int kBc = 32; // keys per tile: one per lane
constexpr unsigned kFull = 0xffffffffu;

template <int HD> struct Cfg {
    static_assert(HD % 32 == 0 && HD >= 32 && HD <= 128, "head dim: 32, 64, 96 or 128");
    static constexpr int kPer = HD / 32;                  // output dims per lane (fwd, dq)
    static constexpr int kRowsPerWarp = HD <= 64 ? 4 : 2; // keeps shared memory under 48 KiB
    static constexpr int kBr = kWarps * kRowsPerWarp;     // query rows per tile
    static constexpr int kLd = HD + 1; // padded shared row: lane j reading row j is conflict-free
    static constexpr int kDimsPerWarp = HD / kWarps; // dk/dv dims per thread
};

// What every kernel needs besides the pointers.
struct Dims {
    int B, T, NH, group;
    float scale;
    size_t ldq, ldk, ldv, ldo;
    int q_begin; // forward: first query row computed
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

// First position of the run of equal ids that holds t0 (its document's start); called by every
// thread of the block, returns the same value to all. Reads kBlock ids per step back from t0, so
// its steps are as many as the keys of t0's document before t0 / kBlock: never the bottleneck.
__device__ int run_start(const int* seg, int t0, int* scratch) {
    const int id = seg[t0];
    int hi = t0; // [hi, t0] is known to be in the run
    while (true) {
        if (threadIdx.x == 0) *scratch = -1;
        __syncthreads();
        const int p = hi - 1 - static_cast<int>(threadIdx.x);
        if (p >= 0 && seg[p] != id) atomicMax(scratch, p);
        __syncthreads();
        const int found = *scratch;
        __syncthreads(); // all have read it before thread 0 resets it
        if (found >= 0) return found + 1;
        hi -= kBlock;
        if (hi <= 0) return 0;
    }
}

// rs[i] = first key row t0+i sees, for i < nr, given s = that of row t0 (thread 0 only).
__device__ void fill_row_starts(int* rs, const int* seg, int t0, int nr, int s) {
    for (int i = 0; i < nr; i++) {
        const int t = t0 + i;
        if (seg && i > 0 && seg[t] != seg[t - 1]) s = t;
        rs[i] = s;
    }
}

// Rows [t0, t0+nr) of head h's dims of a strided (rows, ld) tensor into shared floats (HD wide).
template <int HD, class D>
__device__ void load_rows(float (*dst)[HD], const D* src, size_t ld, const Dims& g, int b, int t0,
                          int nr, int h) {
    for (int i = threadIdx.x; i < nr * HD; i += kBlock) {
        const int r = i / HD, d = i % HD;
        dst[r][d] = to_float(src[row_of(g, b, t0 + r) * ld + static_cast<size_t>(h) * HD + d]);
    }
}
// The same into a padded (kBc, HD+1) tile: rows of keys.
template <int HD, class D>
__device__ void load_keys(float (*dst)[HD + 1], const D* src, size_t ld, const Dims& g, int b,
                          int c0, int nc, int kh) {
    for (int i = threadIdx.x; i < nc * HD; i += kBlock) {
        const int r = i / HD, d = i % HD;
        dst[r][d] = to_float(src[row_of(g, b, c0 + r) * ld + static_cast<size_t>(kh) * HD + d]);
    }
}

template <int HD> __device__ __forceinline__ float dot(const float* a, const float* b) {
    float s = 0.0f;
#pragma unroll 8
    for (int d = 0; d < HD; d++)
        s += a[d] * b[d];
    return s;
}

// ---------------------------------------------------------------------------------- forward

template <int HD, class D>
__global__ void __launch_bounds__(kBlock) fwd_kernel(D* out, float* lse, const D* q, const D* k,
                                                     const D* v, const int* segments, Dims g) {
    using C = Cfg<HD>;
    __shared__ float qs[C::kBr][HD];
    __shared__ float ks[kBc][C::kLd];
    __shared__ float vs[kBc][C::kLd];
    __shared__ int rs[C::kBr];
    __shared__ int scratch;
    const int b = blockIdx.z, h = blockIdx.y, t0 = g.q_begin + blockIdx.x * C::kBr;
    const int nr = min(C::kBr, g.T - t0), last = t0 + nr - 1, kh = h / g.group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* seg = segments ? segments + static_cast<size_t>(b) * g.T : nullptr;

    load_rows<HD>(qs, q, g.ldq, g, b, t0, nr, h);
    const int start0 = seg ? run_start(seg, t0, &scratch) : 0;
    if (threadIdx.x == 0) fill_row_starts(rs, seg, t0, nr, start0);

    float o[C::kRowsPerWarp][C::kPer], m[C::kRowsPerWarp], l[C::kRowsPerWarp];
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
#pragma unroll
        for (int e = 0; e < C::kPer; e++)
            o[rr][e] = 0.0f;
    }
    for (int c0 = start0; c0 <= last; c0 += kBc) {
        const int nc = min(kBc, last + 1 - c0);
        __syncthreads(); // the previous tile is read (and qs, rs are written)
        load_keys<HD>(ks, k, g.ldk, g, b, c0, nc, kh);
        load_keys<HD>(vs, v, g.ldv, g, b, c0, nc, kh);
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
            const int i = warp * C::kRowsPerWarp + rr; // warp-uniform
            if (i >= nr) continue;
            const int t = t0 + i, c = c0 + lane;
            float s = -INFINITY;
            if (lane < nc && c <= t && c >= rs[i]) s = dot<HD>(qs[i], ks[lane]) * g.scale;
            const float mx = fmaxf(m[rr], warp_max(s));
            if (mx == -INFINITY) continue; // nothing seen by this row yet (warp-uniform)
            const float p = s == -INFINITY ? 0.0f : expf(s - mx);
            const float alpha = expf(m[rr] - mx); // 0 when m was -inf
            l[rr] = l[rr] * alpha + warp_sum(p);
            m[rr] = mx;
#pragma unroll
            for (int e = 0; e < C::kPer; e++)
                o[rr][e] *= alpha;
            for (int j = 0; j < nc; j++) {
                const float pj = __shfl_sync(kFull, p, j);
#pragma unroll
                for (int e = 0; e < C::kPer; e++)
                    o[rr][e] += pj * vs[j][lane + 32 * e];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
        const int i = warp * C::kRowsPerWarp + rr;
        if (i >= nr) continue;
        // every row sees at least itself: l >= 1
        const float inv = 1.0f / l[rr];
        D* dst = out + row_of(g, b, t0 + i) * g.ldo + static_cast<size_t>(h) * HD;
#pragma unroll
        for (int e = 0; e < C::kPer; e++)
            dst[lane + 32 * e] = from_float<D>(o[rr][e] * inv);
        if (lane == 0) lse[stat_of(g, b, h, t0 + i)] = m[rr] + logf(l[rr]);
    }
}

// ---------------------------------------------------------------------------------- backward

// delta[b,h,t] = sum_d dout * out (a warp per row).
template <int HD, class D>
__global__ void __launch_bounds__(kBlock)
    delta_kernel(float* delta, const D* dout, const D* out, Dims g) {
    const size_t rows = static_cast<size_t>(g.B) * g.T * g.NH;
    const size_t warps = static_cast<size_t>(gridDim.x) * kWarps;
    const int lane = threadIdx.x % 32;
    for (size_t r = blockIdx.x * static_cast<size_t>(kWarps) + threadIdx.x / 32; r < rows;
         r += warps) {
        const int h = static_cast<int>(r % g.NH);
        const size_t bt = r / g.NH; // b*T + t
        const D* dd = dout + bt * g.ldo + static_cast<size_t>(h) * HD;
        const D* o = out + bt * g.ldo + static_cast<size_t>(h) * HD;
        float s = 0.0f;
        for (int d = lane; d < HD; d += 32)
            s += to_float(dd[d]) * to_float(o[d]);
        s = warp_sum(s);
        const int b = static_cast<int>(bt / g.T), t = static_cast<int>(bt % g.T);
        if (lane == 0) delta[stat_of(g, b, h, t)] = s;
    }
}

// dk, dv of the keys [c0, c0+32) of kv head kh: over the query heads of the group and the query
// rows from c0 on while they still see the tile (starts clamped to c0: keys below do not matter).
template <int HD, class D>
__global__ void __launch_bounds__(kBlock)
    dkdv_kernel(D* dk_out, D* dv_out, size_t lddk, size_t lddv, const D* q, const D* k, const D* v,
                const D* dout, const float* lse, const float* delta, const int* segments, Dims g) {
    using C = Cfg<HD>;
    __shared__ float ks[kBc][C::kLd];
    __shared__ float vs[kBc][C::kLd];
    __shared__ float qs[C::kBr][HD];
    __shared__ float dos[C::kBr][HD];
    __shared__ float ps[C::kBr][kBc];
    __shared__ float dss[C::kBr][kBc];
    __shared__ float Ls[C::kBr], Ds[C::kBr];
    __shared__ int rs[C::kBr];
    const int b = blockIdx.z, kh = blockIdx.y, c0 = blockIdx.x * kBc;
    const int nc = min(kBc, g.T - c0), clast = c0 + nc - 1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* seg = segments ? segments + static_cast<size_t>(b) * g.T : nullptr;

    load_keys<HD>(ks, k, g.ldk, g, b, c0, nc, kh);
    load_keys<HD>(vs, v, g.ldv, g, b, c0, nc, kh);
    float dk[C::kDimsPerWarp], dv[C::kDimsPerWarp];
#pragma unroll
    for (int e = 0; e < C::kDimsPerWarp; e++)
        dk[e] = dv[e] = 0.0f;
    const int d0 = warp * C::kDimsPerWarp;

    for (int h = kh * g.group; h < (kh + 1) * g.group; h++) {
        int s_prev = c0; // thread 0: clamped start of the row before the tile
        for (int t0 = c0; t0 < g.T; t0 += C::kBr) {
            const int nr = min(C::kBr, g.T - t0);
            __syncthreads(); // the previous tile's shared data is read
            load_rows<HD>(qs, q, g.ldq, g, b, t0, nr, h);
            load_rows<HD>(dos, dout, g.ldo, g, b, t0, nr, h);
            for (int i = threadIdx.x; i < nr; i += kBlock) {
                Ls[i] = lse[stat_of(g, b, h, t0 + i)];
                Ds[i] = delta[stat_of(g, b, h, t0 + i)];
            }
            if (threadIdx.x == 0) {
                int s = s_prev;
                if (t0 > c0 && seg && seg[t0] != seg[t0 - 1]) s = t0;
                fill_row_starts(rs, seg, t0, nr, s);
                s_prev = rs[nr - 1];
            }
            __syncthreads();
            if (rs[0] > clast) break; // this and later rows are in later documents (uniform)
            // P and dS of the (nr x 32) tile: warps split the rows, lane j is key c0+j
            for (int i = warp; i < nr; i += kWarps) {
                const int t = t0 + i, c = c0 + lane;
                float p = 0.0f, ds = 0.0f;
                if (lane < nc && c <= t && c >= rs[i]) {
                    p = expf(dot<HD>(qs[i], ks[lane]) * g.scale - Ls[i]);
                    ds = p * (dot<HD>(dos[i], vs[lane]) - Ds[i]) * g.scale;
                }
                ps[i][lane] = p;
                dss[i][lane] = ds;
            }
            __syncthreads();
            // dv[j] += P^T dout, dk[j] += dS^T q (lane j, this warp's dims), rows in order
            for (int i = 0; i < nr; i++) {
                const float p = ps[i][lane], ds = dss[i][lane];
#pragma unroll
                for (int e = 0; e < C::kDimsPerWarp; e++) {
                    dv[e] += p * dos[i][d0 + e];
                    dk[e] += ds * qs[i][d0 + e];
                }
            }
        }
    }
    if (lane < nc) {
        const size_t r = row_of(g, b, c0 + lane);
        D* dkr = dk_out + r * lddk + static_cast<size_t>(kh) * HD + d0;
        D* dvr = dv_out + r * lddv + static_cast<size_t>(kh) * HD + d0;
#pragma unroll
        for (int e = 0; e < C::kDimsPerWarp; e++) {
            dkr[e] = from_float<D>(dk[e]);
            dvr[e] = from_float<D>(dv[e]);
        }
    }
}

// dq of a query tile: over the key tiles it sees, as the forward.
template <int HD, class D>
__global__ void __launch_bounds__(kBlock)
    dq_kernel(D* dq_out, size_t lddq, const D* q, const D* k, const D* v, const D* dout,
              const float* lse, const float* delta, const int* segments, Dims g) {
    using C = Cfg<HD>;
    __shared__ float qs[C::kBr][HD];
    __shared__ float dos[C::kBr][HD];
    __shared__ float ks[kBc][C::kLd];
    __shared__ float vs[kBc][C::kLd];
    __shared__ float Ls[C::kBr], Ds[C::kBr];
    __shared__ int rs[C::kBr];
    __shared__ int scratch;
    const int b = blockIdx.z, h = blockIdx.y, t0 = g.q_begin + blockIdx.x * C::kBr;
    const int nr = min(C::kBr, g.T - t0), last = t0 + nr - 1, kh = h / g.group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* seg = segments ? segments + static_cast<size_t>(b) * g.T : nullptr;

    load_rows<HD>(qs, q, g.ldq, g, b, t0, nr, h);
    load_rows<HD>(dos, dout, g.ldo, g, b, t0, nr, h);
    for (int i = threadIdx.x; i < nr; i += kBlock) {
        Ls[i] = lse[stat_of(g, b, h, t0 + i)];
        Ds[i] = delta[stat_of(g, b, h, t0 + i)];
    }
    const int start0 = seg ? run_start(seg, t0, &scratch) : 0;
    if (threadIdx.x == 0) fill_row_starts(rs, seg, t0, nr, start0);

    float dq[C::kRowsPerWarp][C::kPer];
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++)
#pragma unroll
        for (int e = 0; e < C::kPer; e++)
            dq[rr][e] = 0.0f;
    for (int c0 = start0; c0 <= last; c0 += kBc) {
        const int nc = min(kBc, last + 1 - c0);
        __syncthreads();
        load_keys<HD>(ks, k, g.ldk, g, b, c0, nc, kh);
        load_keys<HD>(vs, v, g.ldv, g, b, c0, nc, kh);
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
            const int i = warp * C::kRowsPerWarp + rr; // warp-uniform
            if (i >= nr) continue;
            const int t = t0 + i, c = c0 + lane;
            float ds = 0.0f;
            if (lane < nc && c <= t && c >= rs[i]) {
                const float p = expf(dot<HD>(qs[i], ks[lane]) * g.scale - Ls[i]);
                ds = p * (dot<HD>(dos[i], vs[lane]) - Ds[i]) * g.scale;
            }
            for (int j = 0; j < nc; j++) {
                const float dsj = __shfl_sync(kFull, ds, j);
#pragma unroll
                for (int e = 0; e < C::kPer; e++)
                    dq[rr][e] += dsj * ks[j][lane + 32 * e];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < C::kRowsPerWarp; rr++) {
        const int i = warp * C::kRowsPerWarp + rr;
        if (i >= nr) continue;
        D* dst = dq_out + row_of(g, b, t0 + i) * lddq + static_cast<size_t>(h) * HD;
#pragma unroll
        for (int e = 0; e < C::kPer; e++)
            dst[lane + 32 * e] = from_float<D>(dq[rr][e]);
    }
}

// ---------------------------------------------------------------------------------- host side

template <class T> Dims dims_of(const AttnArgs<T>& a, const char* op) {
    detail::check_attention_args(a.B, a.T, a.num_heads, a.num_kv_heads, a.head_dim, op);
    if (a.B > 65535 || a.num_heads > 65535)
        SOF_FAIL(Config, "%s (CUDA): B=%d and num_heads=%d must be at most 65535 (grid limits)", op,
                 a.B, a.num_heads);
    return Dims{a.B,
                a.T,
                a.num_heads,
                a.num_heads / a.num_kv_heads,
                1.0f / std::sqrt(static_cast<float>(a.head_dim)),
                a.ldq,
                a.ldk,
                a.ldv,
                a.ldo,
                a.q_begin};
}

[[noreturn]] void unsupported_head_dim(int hd, const char* op) {
    SOF_FAIL(Config,
             "%s (CUDA): head_dim=%d is not supported; the CUDA twin is built for head dims 32, "
             "64, 96 and 128 (add the case to the switches in lib/kernels/cuda/attention.cu)",
             op, hd);
}

unsigned int ceil_div(int n, int d) {
    return static_cast<unsigned int>((n + d - 1) / d);
}

template <int HD, class T>
void launch_forward(T* out, float* lse, const AttnArgs<T>& a, const Dims& g, cudaStream_t s) {
    const dim3 grid(ceil_div(a.T - a.q_begin, Cfg<HD>::kBr), a.num_heads, a.B);
    fwd_kernel<HD><<<grid, kBlock, 0, s>>>(dev_ptr(out), lse, dev_ptr(a.q), dev_ptr(a.k),
                                           dev_ptr(a.v), a.segments, g);
    SOF_CHECK_CUDA(cudaGetLastError());
}

template <int HD, class T>
void launch_backward(const AttnGrads<T>& d, const T* dout, const T* out, const float* lse,
                     float* delta, const AttnArgs<T>& a, const Dims& g, cudaStream_t s) {
    const size_t rows = static_cast<size_t>(a.B) * a.T * a.num_heads;
    const size_t want = (rows + kWarps - 1) / kWarps; // a warp per row, grid-stride past the cap
    const unsigned int dblocks = static_cast<unsigned int>(want < 65535u * 8u ? want : 65535u * 8u);
    delta_kernel<HD><<<dblocks, kBlock, 0, s>>>(delta, dev_ptr(dout), dev_ptr(out), g);
    SOF_CHECK_CUDA(cudaGetLastError());
    const dim3 kv_grid(ceil_div(a.T, kBc), a.num_kv_heads, a.B);
    dkdv_kernel<HD><<<kv_grid, kBlock, 0, s>>>(dev_ptr(d.k), dev_ptr(d.v), d.ldk, d.ldv,
                                               dev_ptr(a.q), dev_ptr(a.k), dev_ptr(a.v),
                                               dev_ptr(dout), lse, delta, a.segments, g);
    SOF_CHECK_CUDA(cudaGetLastError());
    const dim3 q_grid(ceil_div(a.T, Cfg<HD>::kBr), a.num_heads, a.B);
    dq_kernel<HD><<<q_grid, kBlock, 0, s>>>(dev_ptr(d.q), d.ldq, dev_ptr(a.q), dev_ptr(a.k),
                                            dev_ptr(a.v), dev_ptr(dout), lse, delta, a.segments, g);
    SOF_CHECK_CUDA(cudaGetLastError());
}

} // namespace

// The kernels are ordered on the stream (delta, then dk/dv, then dq); each output element is
// written by one thread after a fixed-order sum: the same bits on every run.
template <class T> void attention_forward(T* out, float* lse, const AttnArgs<T>& a, void* stream) {
    const char* op = "attention_forward";
    const Dims g = dims_of(a, op);
    if (a.q_begin < 0 || a.q_begin > a.T)
        SOF_FAIL(Internal, "%s: q_begin = %d outside 0..T = %d", op, a.q_begin, a.T);
    if (a.B == 0 || a.T == a.q_begin) return;
    const cudaStream_t s = as_stream(stream);
    switch (a.head_dim) {
    case 32:
        launch_forward<32>(out, lse, a, g, s);
        break;
    case 64:
        launch_forward<64>(out, lse, a, g, s);
        break;
    case 96:
        launch_forward<96>(out, lse, a, g, s);
        break;
    case 128:
        launch_forward<128>(out, lse, a, g, s);
        break;
    default:
        unsupported_head_dim(a.head_dim, op);
    }
}

template <class T>
void attention_backward(const AttnGrads<T>& d, const T* dout, const T* out, const float* lse,
                        float* delta, const AttnArgs<T>& a, void* stream) {
    const char* op = "attention_backward";
    const Dims g = dims_of(a, op);
    if (a.q_begin != 0)
        SOF_FAIL(Internal, "%s: q_begin = %d (the backward runs every row)", op, a.q_begin);
    if (a.B == 0 || a.T == 0) return;
    const cudaStream_t s = as_stream(stream);
    switch (a.head_dim) {
    case 32:
        launch_backward<32>(d, dout, out, lse, delta, a, g, s);
        break;
    case 64:
        launch_backward<64>(d, dout, out, lse, delta, a, g, s);
        break;
    case 96:
        launch_backward<96>(d, dout, out, lse, delta, a, g, s);
        break;
    case 128:
        launch_backward<128>(d, dout, out, lse, delta, a, g, s);
        break;
    default:
        unsupported_head_dim(a.head_dim, op);
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
