// The block-level pieces of the tensor-core attention (flash_fwd.cuh, flash_bwd.cuh): parameters,
// the machine interface the tile code runs on (the GPU, or the host's warp emulator in tests),
// tile loads into swizzled shared memory, document starts and fragment conversions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/attention.h" // detail::AttnDropout
#include "kernels/cuda/flash_layout.cuh"

// The tile code is compiled twice: by nvcc for the GPU (flash_device.cuh's DeviceMachine) and by
// the host compiler for the warp emulator of tests/kernels (one host thread of execution per
// emulated GPU thread). It touches the hardware only through the machine M:
//   int tid(); unsigned char* smem();                  thread in the block, dynamic shared memory
//   void sync();                                       __syncthreads
//   float shfl_xor(float, int); int shfl_up(int, int); warp shuffles (all 32 lanes)
//   void atomic_max_shared(int*, int), atomic_min_shared(int*, int)
//   float exp2(float), log2(float)
//   uint32_t pack_bf16(float lo, float hi)             two bf16 (round to nearest even), lo low
//   void ldsm_x4(uint32_t (&)[4], const unsigned char*), ldsm_x4_trans(...)   ldmatrix (shared)
//   void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)  d += a b
//   void cp_async16(unsigned char* dst, const void* src, bool valid)   zeros when !valid
//   void cp_async4(unsigned char* dst, const void* src, bool valid)
//   void cp_commit(); void cp_wait_all();
//   T ld(const T*); void st(T*, T)                      global memory
#if defined(__CUDACC__)
#define SOF_FLASH_FN __device__ __forceinline__
#define SOF_UNROLL _Pragma("unroll")
#else
#define SOF_FLASH_FN inline
#define SOF_UNROLL
#endif

namespace sof::kernels::cuda::flash {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Everything a block needs. q, k, v (and out, dout and the grads) are bf16 bit patterns, rows
// (b, t) at (b*T + t) * ld, head h at column h * D; lse and delta are (B, NH, T) fp32.
struct Params {
    const uint16_t* q;
    const uint16_t* k;
    const uint16_t* v;
    size_t ldq, ldk, ldv;
    const int* seg; // (B, T) document ids or null
    int B, T, NH, group;
    float scale;      // 1 / sqrt(D)
    float scale_log2; // scale * log2(e): scores in the exp2 domain
    // 16-byte rows: every tensor pointer 16-byte aligned and every ld a multiple of 8; else the
    // tiles are loaded and stored element by element
    bool vec;
    // forward
    uint16_t* out;
    size_t ldo; // out and dout
    float* lse_out;
    // backward
    const uint16_t* dout;
    const float* lse;
    const float* delta;
    uint16_t* dq;
    uint16_t* dk;
    uint16_t* dv;
    size_t lddq, lddk, lddv;
    // features (attention.h): sliding window W (0: none), sink logits (NH, natural-log units) or
    // null, probability dropout (read by the kernels instantiated with kDrop only)
    int window;
    const float* sinks;
    detail::AttnDropout drop;
};

SOF_HD int imin(int a, int b) {
    return a < b ? a : b;
}
SOF_HD int imax(int a, int b) {
    return a > b ? a : b;
}
SOF_HD float fmax_(float a, float b) {
    return a > b ? a : b;
}

SOF_HD size_t row_index(const Params& p, int b, int t) {
    return static_cast<size_t>(b) * p.T + t;
}
SOF_HD size_t stat_index(const Params& p, int b, int h, int t) {
    return (static_cast<size_t>(b) * p.NH + h) * p.T + t;
}

template <int D> SOF_FLASH_FN const unsigned char* at(const unsigned char* tile, RC rc) {
    return tile + swz_offset(rc.row, rc.col, D);
}

// Rows row0 .. row0+R-1 of a (B, T, ld) bf16 tensor, columns col0 .. col0+D-1 (one head), into
// the swizzled tile (R x D); rows at or past T are zeros. Every thread calls it; with p.vec the
// copies are cp.async (the caller commits and waits), else plain loads and stores.
template <int R, int D, class M>
SOF_FLASH_FN void load_tile(M& m, unsigned char* tile, const uint16_t* g, size_t ld, size_t col0,
                            int b, int row0, const Params& p) {
    constexpr int kChunks = D / 8;
    for (int i = m.tid(); i < R * kChunks; i += kThreads) {
        const int r = i / kChunks, c = i % kChunks, t = row0 + r;
        const bool valid = t < p.T;
        unsigned char* dst = tile + swz_offset(r, c * 8, D);
        const uint16_t* src = valid ? g + row_index(p, b, t) * ld + col0 + c * 8 : g;
        if (p.vec) {
            m.cp_async16(dst, src, valid);
        } else {
            uint32_t* d32 = reinterpret_cast<uint32_t*>(dst);
            for (int w = 0; w < 4; w++) {
                const uint32_t lo = valid ? m.ld(src + 2 * w) : 0u;
                const uint32_t hi = valid ? m.ld(src + 2 * w + 1) : 0u;
                d32[w] = lo | (hi << 16);
            }
        }
    }
}

// R fp32 values x[stat(b, h, t0 + i)] into dst[i] (zeros past T) by cp.async (threads < R).
template <int R, class M>
SOF_FLASH_FN void load_stats(M& m, float* dst, const float* x, const Params& p, int b, int h,
                             int t0) {
    const int i = m.tid();
    if (i < R) {
        const bool valid = t0 + i < p.T;
        m.cp_async4(reinterpret_cast<unsigned char*>(dst + i),
                    valid ? x + stat_index(p, b, h, t0 + i) : x, valid);
    }
}

// The dropout factor (scale or 0) of probability (b, h, row t, key c).
SOF_HD float drop_factor(const Params& p, int b, int h, int t, int c) {
    const DropoutMask& dm = p.drop.mask;
    return dm.keep(p.drop.row(b, h, t) + static_cast<uint64_t>(c)) ? dm.scale : 0.0f;
}
// The factors of keys c and c + 1 of row t: one Philox draw when both are in one group of four.
SOF_HD void drop_pair(const Params& p, int b, int h, int t, int c, float& z0, float& z1) {
    const DropoutMask& dm = p.drop.mask;
    const uint64_t e = p.drop.row(b, h, t) + static_cast<uint64_t>(c);
    const uint32_t i = static_cast<uint32_t>(e & 3u);
    const core::Philox4 w = dm.draw(e);
    z0 = dm.keep_word(DropoutMask::word(w, i)) ? dm.scale : 0.0f;
    const uint32_t w1 = i < 3u ? DropoutMask::word(w, i + 1u) : dm.draw(e + 1u).v[0];
    z1 = dm.keep_word(w1) ? dm.scale : 0.0f;
}

// The first key of row t0, not below floor, for a window W > 0 not below t0 - W + 1.
SOF_HD int window_floor(int floor, int t0, int window) {
    return window > 0 ? imax(floor, t0 - window + 1) : floor;
}

// First position of the run of equal ids that holds t (its document's start), not below floor.
// Every thread calls it and gets the same value; 4 * kThreads ids per step back from t.
template <class M>
SOF_FLASH_FN int block_run_start(M& m, const int* seg, int t, int floor, int* scratch) {
    const int id = m.ld(seg + t);
    int hi = t; // [hi, t] is in the run
    while (hi > floor) {
        if (m.tid() == 0) *scratch = -1;
        m.sync();
        for (int j = 0; j < 4; j++) {
            const int pos = hi - 1 - (m.tid() + j * kThreads);
            if (pos >= floor && m.ld(seg + pos) != id) m.atomic_max_shared(scratch, pos);
        }
        m.sync();
        const int found = *scratch;
        m.sync(); // every thread has read it before thread 0 resets it
        if (found >= 0) return found + 1;
        hi -= 4 * kThreads;
    }
    return floor;
}

// One past the run of equal ids that holds c: the first t > c with seg[t] != seg[c], or T.
template <class M>
SOF_FLASH_FN int block_run_end(M& m, const int* seg, int c, int T, int* scratch) {
    const int id = m.ld(seg + c);
    for (int lo = c + 1; lo < T; lo += 4 * kThreads) {
        if (m.tid() == 0) *scratch = INT_MAX;
        m.sync();
        for (int j = 0; j < 4; j++) {
            const int pos = lo + m.tid() + j * kThreads;
            if (pos < T && m.ld(seg + pos) != id) m.atomic_min_shared(scratch, pos);
        }
        m.sync();
        const int found = *scratch;
        m.sync();
        if (found != INT_MAX) return found;
    }
    return T;
}

// rs[i] = the first key query row t0+i sees, for i < nr (kNoRow for nr <= i < R), given s_in,
// that of row t0: a row where the id changes starts a document, the others keep the start of
// the row before; with a window W > 0, not below t0+i-W+1. An inclusive prefix max over the
// change positions (a shuffle scan per warp, then the warps before). Every thread calls it; it
// ends with a barrier.
template <int R, class M>
SOF_FLASH_FN void row_starts(M& m, int* rs, int* wmax, const int* seg, int t0, int nr, int s_in,
                             int window = 0) {
    static_assert(R % 32 == 0 && R <= kThreads, "rows: whole warps");
    const int i = m.tid(), lane = i & 31, warp = i >> 5;
    if (!seg) {
        if (i < R) rs[i] = i < nr ? window_floor(s_in, t0 + i, window) : kNoRow;
        m.sync();
        return;
    }
    int v = -1;
    if (i < R) { // whole warps
        if (i > 0 && i < nr && m.ld(seg + t0 + i) != m.ld(seg + t0 + i - 1)) v = i;
        for (int d = 1; d < 32; d <<= 1) {
            const int o = m.shfl_up(v, d);
            if (lane >= d) v = imax(v, o);
        }
        if (lane == 31) wmax[warp] = v;
    }
    m.sync();
    if (i < R) {
        for (int w = 0; w < warp; w++)
            v = imax(v, wmax[w]);
        rs[i] = i >= nr ? kNoRow : window_floor(v >= 0 ? t0 + v : s_in, t0 + i, window);
    }
    m.sync();
}

// A query tile of kBr rows (block x -> q_tile_of_block) and the keys its rows see: the forward
// and dQ both start here. Fills rs (row_starts) and ends with its barrier.
struct QTile {
    int t0, nr, last;            // first row, rows (<= kBr), last row
    int kh;                      // the K/V head of query head h
    const int* seg;              // (T) segment ids of batch row b, or nullptr
    size_t qcol, kvcol;          // column of head h in Q/dO/O and of head kh in K/V
    int start0, nkv, start_last; // first key of row t0, key tiles to visit, first key of `last`
};
template <int kBr, int kBc, int D, class M>
SOF_FLASH_FN QTile q_tile(M& m, const Params& p, int bx, int h, int b, int* rs, int* wmax,
                          int* scratch) {
    QTile q;
    q.t0 = q_tile_of_block(bx, ceil_div(p.T, kBr)) * kBr;
    q.nr = imin(kBr, p.T - q.t0);
    q.last = q.t0 + q.nr - 1;
    q.kh = h / p.group;
    q.seg = p.seg ? p.seg + row_index(p, b, 0) : nullptr;
    q.qcol = static_cast<size_t>(h) * D;
    q.kvcol = static_cast<size_t>(q.kh) * D;
    const int floor = window_floor(0, q.t0, p.window);
    q.start0 = q.seg ? block_run_start(m, q.seg, q.t0, floor, scratch) : floor;
    row_starts<kBr>(m, rs, wmax, q.seg, q.t0, q.nr, q.start0, p.window);
    q.nkv = kv_tile_count(q.start0, q.last, kBc);
    q.start_last = rs[q.nr - 1];
    return q;
}

template <int N> SOF_FLASH_FN void zero(float (&x)[N][4]) {
    SOF_UNROLL
    for (int i = 0; i < N; i++) {
        x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.0f;
    }
}

// The A fragments of NT/2 k-steps from the C fragments of NT n-tiles (fp32 -> bf16).
template <int NT, class M>
SOF_FLASH_FN void c_to_a(M& m, uint32_t (&a)[NT / 2][4], const float (&c)[NT][4]) {
    SOF_UNROLL
    for (int kk = 0; kk < NT / 2; kk++) {
        SOF_UNROLL
        for (int r = 0; r < 4; r++) {
            const float(&src)[4] = c[2 * kk + a_from_c_tile(r)];
            a[kk][r] = m.pack_bf16(src[a_from_c_elem(r, 0)], src[a_from_c_elem(r, 1)]);
        }
    }
}

// acc[n-tiles] += A (16 x 16K, K16 k-steps of a) times B read from the tile: non-transposed rows
// n (ldsm_b_src) when kRowsAreN, else rows k with .trans (ldsm_bt_src). NT n-tiles from n0 = 0.
template <int D, int NT, int K16, bool kRowsAreN, class M>
SOF_FLASH_FN void mma_tile(M& m, float (&acc)[NT][4], const uint32_t (&a)[K16][4],
                           const unsigned char* tile, int lane) {
    SOF_UNROLL
    for (int kk = 0; kk < K16; kk++) {
        SOF_UNROLL
        for (int nt = 0; nt < NT; nt += 2) {
            uint32_t r[4];
            if constexpr (kRowsAreN)
                m.ldsm_x4(r, at<D>(tile, ldsm_b_src(lane, nt * 8, kk * 16)));
            else
                m.ldsm_x4_trans(r, at<D>(tile, ldsm_bt_src(lane, kk * 16, nt * 8)));
            m.mma(acc[nt], a[kk], r[0], r[1]);
            m.mma(acc[nt + 1], a[kk], r[2], r[3]);
        }
    }
}

// The A fragments of rows m0..m0+15 of a tile, all K16 k-steps.
template <int D, int K16, class M>
SOF_FLASH_FN void load_a(M& m, uint32_t (&a)[K16][4], const unsigned char* tile, int m0, int lane) {
    SOF_UNROLL
    for (int kk = 0; kk < K16; kk++)
        m.ldsm_x4(a[kk], at<D>(tile, ldsm_a_src(lane, m0, kk * 16)));
}

// Row r of a C-fragment tile set (NT n-tiles, columns 0..8NT-1) times f into a bf16 row: the
// lane's pairs of columns. vec: 32-bit stores, else 16-bit.
template <int NT, class M>
SOF_FLASH_FN void store_row(M& m, uint16_t* dst, const float (&c)[NT][4], int half, float f,
                            int lane, bool vec) {
    SOF_UNROLL
    for (int nt = 0; nt < NT; nt++) {
        const RC rc = frag_c(lane, 2 * half);
        const uint32_t v = m.pack_bf16(c[nt][2 * half] * f, c[nt][2 * half + 1] * f);
        uint16_t* d = dst + nt * 8 + rc.col;
        if (vec) {
            m.st(reinterpret_cast<uint32_t*>(d), v);
        } else {
            m.st(d, static_cast<uint16_t>(v & 0xffffu));
            m.st(d + 1, static_cast<uint16_t>(v >> 16));
        }
    }
}

} // namespace sof::kernels::cuda::flash
