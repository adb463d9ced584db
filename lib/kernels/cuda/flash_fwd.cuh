// Forward of the tensor-core attention (bf16 in and out, fp32 accumulation): one block per
// (query tile of 64 rows, head, batch row), FlashAttention-2's online softmax over key tiles
// (from the band's first key with a sliding window), sinks merged at the end, dropout (kDrop).
#pragma once

#include "kernels/cuda/flash_tile.cuh"

namespace sof::kernels::cuda::flash {

// Tile sizes and the dynamic shared memory of the forward (D = 64 or 128): Q (Br x D), two
// buffers of K and V (Bc x D each), then the row starts and the scan's scratch.
template <int D> struct FwdCfg {
    static_assert(D == 64 || D == 128, "head dim 64 or 128");
    static constexpr int kBr = 64; // query rows: 16 per warp
    static constexpr int kBc = 64; // keys per tile
    static constexpr int kTileQ = kBr * D * 2;
    static constexpr int kTileKV = kBc * D * 2;
    static constexpr int kOffK = kTileQ; // buffer j: K at kOffK + 2 j kTileKV, V after it
    static constexpr int kOffRs = kOffK + 4 * kTileKV;
    static constexpr int kSmem = kOffRs + (kBr + kWarps + 4) * 4;
};

// Grid: (ceil(T / kBr), NH, B); q_tile_of_block maps x to the query tile. kDrop: the kernel
// with probability dropout (p.drop; a separate instantiation keeps the other's registers).
template <int D, bool kDrop, class M>
SOF_FLASH_FN void fwd_block(M& m, const Params& p, int bx, int h, int b) {
    using C = FwdCfg<D>;
    constexpr int kBr = C::kBr, kBc = C::kBc;
    constexpr int kNt = kBc / 8;  // score n-tiles
    constexpr int kDt = D / 8;    // output n-tiles
    constexpr int kKd = D / 16;   // k-steps of Q K^T
    constexpr int kKp = kBc / 16; // k-steps of P V
    unsigned char* sm = m.smem();
    unsigned char* qs = sm;
    int* rs = reinterpret_cast<int*>(sm + C::kOffRs);
    int* wmax = rs + kBr;
    int* scratch = wmax + kWarps;
    const int tid = m.tid(), lane = tid & 31, warp = tid >> 5;
    const QTile qt = q_tile<kBr, kBc, D>(m, p, bx, h, b, rs, wmax, scratch);
    const int t0 = qt.t0, nr = qt.nr, start0 = qt.start0, nkv = qt.nkv;
    const int start_last = qt.start_last;
    const size_t qcol = qt.qcol, kvcol = qt.kvcol;
    auto kbuf = [&](int j) { return sm + C::kOffK + j * 2 * C::kTileKV; };

    load_tile<kBr, D>(m, qs, p.q, p.ldq, qcol, b, t0, p);
    load_tile<kBc, D>(m, kbuf(0), p.k, p.ldk, kvcol, b, start0, p);
    load_tile<kBc, D>(m, kbuf(0) + C::kTileKV, p.v, p.ldv, kvcol, b, start0, p);
    m.cp_commit();

    // this lane's rows of the tile: warp * 16 + g and + 8 (C fragment rows)
    const int row0 = warp * 16 + frag_c(lane, 0).row;
    const int rstart[2] = {rs[row0], rs[row0 + 8]};
    float o[kDt][4];
    zero(o);
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
    uint32_t qf[kKd][4];

    for (int it = 0; it < nkv; it++) {
        const int c0 = start0 + it * kBc;
        m.cp_wait_all();
        m.sync(); // tile it landed for every thread; every warp is done with tile it - 1
        if (it == 0) load_a<D>(m, qf, qs, warp * 16, lane);
        if (it + 1 < nkv) { // prefetch tile it + 1 into the buffer tile it - 1 used
            unsigned char* nb = kbuf((it + 1) & 1);
            load_tile<kBc, D>(m, nb, p.k, p.ldk, kvcol, b, c0 + kBc, p);
            load_tile<kBc, D>(m, nb + C::kTileKV, p.v, p.ldv, kvcol, b, c0 + kBc, p);
            m.cp_commit();
        }
        const unsigned char* ks = kbuf(it & 1);
        const unsigned char* vs = ks + C::kTileKV;

        // S = Q K^T (16 x kBc per warp), in the exp2 domain, masked
        float s[kNt][4];
        zero(s);
        mma_tile<D, kNt, kKd, true>(m, s, qf, ks, lane);
        const bool full = tile_unmasked(t0, nr, kBr, c0, kBc, start_last);
        float mx[2] = {mrow[0], mrow[1]};
        SOF_UNROLL
        for (int nt = 0; nt < kNt; nt++) {
            SOF_UNROLL
            for (int e = 0; e < 4; e++) {
                const RC rc = frag_c(lane, e);
                float x = s[nt][e] * p.scale_log2;
                if (!full &&
                    !visible(t0 + row0 + 8 * (e >> 1), c0 + nt * 8 + rc.col, rstart[e >> 1]))
                    x = -INFINITY;
                s[nt][e] = x;
                mx[e >> 1] = fmax_(mx[e >> 1], x);
            }
        }
        // online softmax: the row max over the quad (the 4 lanes of a row), rescale, P = exp2
        float mu[2];
        SOF_UNROLL
        for (int i = 0; i < 2; i++) {
            mx[i] = fmax_(mx[i], m.shfl_xor(mx[i], 1));
            mx[i] = fmax_(mx[i], m.shfl_xor(mx[i], 2));
            mu[i] = mx[i] == -INFINITY ? 0.0f : mx[i];   // a row that saw nothing yet: P = 0
            const float alpha = m.exp2(mrow[i] - mu[i]); // 0 on the first tile a row sees
            mrow[i] = mx[i];
            lrow[i] *= alpha;
            SOF_UNROLL
            for (int dt = 0; dt < kDt; dt++) {
                o[dt][2 * i] *= alpha;
                o[dt][2 * i + 1] *= alpha;
            }
        }
        SOF_UNROLL
        for (int nt = 0; nt < kNt; nt++) {
            SOF_UNROLL
            for (int e = 0; e < 4; e++) {
                const float pv = m.exp2(s[nt][e] - mu[e >> 1]);
                s[nt][e] = pv;
                lrow[e >> 1] += pv; // this lane's columns; the quad sums at the end
            }
            if constexpr (kDrop) { // l sums every probability, P V the kept ones (scaled)
                SOF_UNROLL
                for (int i = 0; i < 2; i++) {
                    float z0, z1;
                    drop_pair(p, b, h, t0 + row0 + 8 * i, c0 + nt * 8 + frag_c(lane, 2 * i).col, z0,
                              z1);
                    s[nt][2 * i] *= z0;
                    s[nt][2 * i + 1] *= z1;
                }
            }
        }
        // O += P V
        uint32_t pa[kKp][4];
        c_to_a<kNt>(m, pa, s);
        mma_tile<D, kDt, kKp, false>(m, o, pa, vs, lane);
    }

    SOF_UNROLL
    for (int i = 0; i < 2; i++) {
        lrow[i] += m.shfl_xor(lrow[i], 1);
        lrow[i] += m.shfl_xor(lrow[i], 2);
        const int r = row0 + 8 * i;
        if (r >= nr) continue;
        const int t = t0 + r;
        // a sink joins the denominator (in the exp2 domain: z log2 e)
        float mf = mrow[i], lf = lrow[i], f = 1.0f;
        if (p.sinks) {
            const float z = m.ld(p.sinks + h) * kLog2e, m2 = fmax_(mf, z);
            f = m.exp2(mf - m2);
            lf = lf * f + m.exp2(z - m2);
            mf = m2;
        }
        // every row sees itself: l >= 1 (the guard keeps a broken input finite-free of 1/0)
        const float inv = lf > 0.0f ? f / lf : 0.0f;
        store_row<kDt>(m, p.out + row_index(p, b, t) * p.ldo + qcol, o, i, inv, lane, p.vec);
        if ((lane & 3) == 0) m.st(p.lse_out + stat_index(p, b, h, t), (mf + m.log2(lf)) * kLn2);
    }
}

} // namespace sof::kernels::cuda::flash
