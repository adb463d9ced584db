// Backward of the tensor-core attention (bf16, fp32 accumulation), deterministic: dk/dv per key
// tile over the query rows that see it (all heads of its group), then dq per query tile over its
// key tiles (no atomics; each output written once after a fixed-order sum). delta = rowsum(dout *
// out) comes first from the CUDA-core kernel's delta pass (attention.cu).
#pragma once

#include "kernels/cuda/flash_tile.cuh"

namespace sof::kernels::cuda::flash {

// Tile sizes (D = 64 or 128). dk/dv: kBc keys per block (16 per warp), kBrKV query rows per
// step; dq: kBrQ query rows per block (16 per warp), kBcQ keys per step. At D = 128 the steps
// are halved and K, V stay in shared memory (not in registers) to keep under 255 registers.
template <int D> struct BwdCfg {
    static_assert(D == 64 || D == 128, "head dim 64 or 128");
    static constexpr int kBc = 64;
    static constexpr int kBrKV = D <= 64 ? 64 : 32;
    static constexpr bool kKeepKV = D <= 64;
    static constexpr int kBrQ = 64;
    static constexpr int kBcQ = D <= 64 ? 64 : 32;
    // dk/dv shared memory: K, V (kBc x D); per buffer j: Q, dout (kBrKV x D), lse, delta
    // (kBrKV fp32); then row starts and scratch
    static constexpr int kTileKVk = kBc * D * 2;
    static constexpr int kTileQk = kBrKV * D * 2;
    static constexpr int kBufK = 2 * kTileQk + 2 * kBrKV * 4;
    static constexpr int kOffBufK = 2 * kTileKVk;
    static constexpr int kOffRsK = kOffBufK + 2 * kBufK;
    static constexpr int kSmemKV = kOffRsK + (kBrKV + kWarps + 4) * 4;
    // dq shared memory: Q, dout (kBrQ x D), lse, delta, row starts (kBrQ), scratch; per buffer
    // j: K, V (kBcQ x D)
    static constexpr int kTileQq = kBrQ * D * 2;
    static constexpr int kTileKVq = kBcQ * D * 2;
    static constexpr int kOffStatQ = 2 * kTileQq;
    static constexpr int kOffBufQ = kOffStatQ + (3 * kBrQ + kWarps + 4) * 4;
    static constexpr int kSmemQ = kOffBufQ + 4 * kTileKVq;
};

// dk, dv of keys [c0, c0 + kBc) of kv head kh (grid: (ceil(T / kBc), NKV, B), block x = key
// tile x). Query rows from c0 to the end of the document holding the tile's last key (with a
// window W, to row clast + W - 1 at most) see it; for each query head of the group, steps of
// kBrKV rows, double-buffered. kDrop: with probability dropout (dV += (P Z)^T dO, dS = P (dP Z -
// delta)).
template <int D, bool kDrop, class M>
SOF_FLASH_FN void dkdv_block(M& m, const Params& p, int kt, int kh, int b) {
    using C = BwdCfg<D>;
    constexpr int kBc = C::kBc, kBr = C::kBrKV;
    constexpr int kNq = kBr / 8;  // n-tiles over query rows (S^T, dP^T)
    constexpr int kKq = kBr / 16; // k-steps over query rows (dV, dK)
    constexpr int kKd = D / 16;   // k-steps over dims (S^T, dP^T)
    constexpr int kDt = D / 8;    // n-tiles over dims (dK, dV)
    // K, V fragments kept in registers (BwdCfg); not with dropout, whose Philox draws need the
    // registers (at D = 64 they would spill)
    constexpr bool kKeepKV = C::kKeepKV && !kDrop;
    unsigned char* sm = m.smem();
    const unsigned char* ks = sm;
    const unsigned char* vs = sm + C::kTileKVk;
    int* rs = reinterpret_cast<int*>(sm + C::kOffRsK);
    int* wmax = rs + kBr;
    int* scratch = wmax + kWarps;
    auto buf = [&](int j) { return sm + C::kOffBufK + j * C::kBufK; };
    const int tid = m.tid(), lane = tid & 31, warp = tid >> 5;
    const int c0 = kt * kBc, clast = imin(c0 + kBc, p.T) - 1;
    const int* seg = p.seg ? p.seg + row_index(p, b, 0) : nullptr;
    const size_t kvcol = static_cast<size_t>(kh) * D;
    int t_end = seg ? block_run_end(m, seg, clast, p.T, scratch) : p.T;
    // rows past clast + W - 1 are outside the band (compared, not added: W may be near INT_MAX)
    if (p.window > 0 && p.window < t_end - clast) t_end = clast + p.window;
    const int nqt = ceil_div(t_end - c0, kBr), items = p.group * nqt;

    // item i: query head kh * group + i / nqt, rows c0 + (i % nqt) * kBr ..
    auto load_item = [&](int item, unsigned char* bb) {
        const int h = kh * p.group + item / nqt, t0 = c0 + (item % nqt) * kBr;
        const size_t qcol = static_cast<size_t>(h) * D;
        load_tile<kBr, D>(m, bb, p.q, p.ldq, qcol, b, t0, p);
        load_tile<kBr, D>(m, bb + C::kTileQk, p.dout, p.ldo, qcol, b, t0, p);
        float* st = reinterpret_cast<float*>(bb + 2 * C::kTileQk);
        load_stats<kBr>(m, st, p.lse, p, b, h, t0);
        load_stats<kBr>(m, st + kBr, p.delta, p, b, h, t0);
    };
    load_tile<kBc, D>(m, sm, p.k, p.ldk, kvcol, b, c0, p);
    load_tile<kBc, D>(m, sm + C::kTileKVk, p.v, p.ldv, kvcol, b, c0, p);
    load_item(0, buf(0));
    m.cp_commit();

    float dk[kDt][4], dv[kDt][4];
    zero(dk);
    zero(dv);
    uint32_t kf[kKeepKV ? kKd : 1][4], vf[kKeepKV ? kKd : 1][4];
    const int key0 = warp * 16 + frag_c(lane, 0).row; // this lane's keys: c0 + key0, + 8
    int carry = c0; // start (clamped to c0) of the last row of the previous step

    for (int item = 0; item < items; item++) {
        const int qi = item % nqt, t0 = c0 + qi * kBr;
        const int nr = imin(kBr, p.T - t0);
        m.cp_wait_all();
        m.sync(); // this step's tiles landed; every warp is done with the previous step
        if constexpr (kKeepKV) {
            if (item == 0) {
                load_a<D>(m, kf, ks, warp * 16, lane);
                load_a<D>(m, vf, vs, warp * 16, lane);
            }
        }
        // starts clamped to c0 (keys below c0 do not matter here)
        int s_in = c0;
        if (qi > 0) s_in = seg && m.ld(seg + t0) != m.ld(seg + t0 - 1) ? t0 : carry;
        row_starts<kBr>(m, rs, wmax, seg, t0, nr, s_in, p.window); // ends with a barrier
        carry = rs[kBr - 1];
        const bool full = tile_unmasked(t0, nr, kBr, c0, kBc, rs[nr - 1]);
        if (item + 1 < items) {
            load_item(item + 1, buf((item + 1) & 1));
            m.cp_commit();
        }
        const unsigned char* qs = buf(item & 1);
        const unsigned char* dos = qs + C::kTileQk;
        const float* ls = reinterpret_cast<const float*>(qs + 2 * C::kTileQk);
        const float* ds = ls + kBr;

        // S^T = K Q^T and dP^T = V dout^T (16 keys x kBr rows per warp)
        float st[kNq][4], dpt[kNq][4];
        zero(st);
        zero(dpt);
        if constexpr (kKeepKV) {
            mma_tile<D, kNq, kKd, true>(m, st, kf, qs, lane);
            mma_tile<D, kNq, kKd, true>(m, dpt, vf, dos, lane);
        } else {
            SOF_UNROLL
            for (int kk = 0; kk < kKd; kk++) {
                uint32_t a[1][4];
                m.ldsm_x4(a[0], at<D>(ks, ldsm_a_src(lane, warp * 16, kk * 16)));
                SOF_UNROLL
                for (int nt = 0; nt < kNq; nt += 2) {
                    uint32_t r[4];
                    m.ldsm_x4(r, at<D>(qs, ldsm_b_src(lane, nt * 8, kk * 16)));
                    m.mma(st[nt], a[0], r[0], r[1]);
                    m.mma(st[nt + 1], a[0], r[2], r[3]);
                }
                m.ldsm_x4(a[0], at<D>(vs, ldsm_a_src(lane, warp * 16, kk * 16)));
                SOF_UNROLL
                for (int nt = 0; nt < kNq; nt += 2) {
                    uint32_t r[4];
                    m.ldsm_x4(r, at<D>(dos, ldsm_b_src(lane, nt * 8, kk * 16)));
                    m.mma(dpt[nt], a[0], r[0], r[1]);
                    m.mma(dpt[nt + 1], a[0], r[2], r[3]);
                }
            }
        }
        // P^T = exp2(S^T scale log2e - lse log2e) (0 where not seen), dS^T = P^T (dP^T - delta)
        SOF_UNROLL
        for (int nt = 0; nt < kNq; nt++) {
            SOF_UNROLL
            for (int e = 0; e < 4; e++) {
                const int col = nt * 8 + frag_c(lane, e).col; // query row of the step
                const int key = c0 + key0 + 8 * (e >> 1);
                float pv = m.exp2(st[nt][e] * p.scale_log2 - ls[col] * kLog2e);
                if (!full && !visible(t0 + col, key, rs[col])) pv = 0.0f;
                if constexpr (kDrop) {
                    const int h = kh * p.group + item / nqt;
                    const float z = drop_factor(p, b, h, t0 + col, key);
                    st[nt][e] = pv * z;
                    dpt[nt][e] = pv * (dpt[nt][e] * z - ds[col]);
                } else {
                    st[nt][e] = pv;
                    dpt[nt][e] = pv * (dpt[nt][e] - ds[col]);
                }
            }
        }
        // dV += P^T dout, dK += dS^T Q (k = query rows)
        uint32_t pa[kKq][4], dsa[kKq][4];
        c_to_a<kNq>(m, pa, st);
        c_to_a<kNq>(m, dsa, dpt);
        mma_tile<D, kDt, kKq, false>(m, dv, pa, dos, lane);
        mma_tile<D, kDt, kKq, false>(m, dk, dsa, qs, lane);
    }

    SOF_UNROLL
    for (int i = 0; i < 2; i++) {
        const int key = c0 + key0 + 8 * i;
        if (key >= p.T) continue;
        store_row<kDt>(m, p.dk + row_index(p, b, key) * p.lddk + kvcol, dk, i, p.scale, lane,
                       p.vec);
        store_row<kDt>(m, p.dv + row_index(p, b, key) * p.lddv + kvcol, dv, i, 1.0f, lane, p.vec);
    }
}

// dq of a query tile (grid: (ceil(T / kBrQ), NH, B), block x -> q_tile_of_block), over its key
// tiles as the forward: dQ = scale * sum dS K (kDrop: dS = P (dP Z - delta)).
template <int D, bool kDrop, class M>
SOF_FLASH_FN void dq_block(M& m, const Params& p, int bx, int h, int b) {
    using C = BwdCfg<D>;
    constexpr int kBr = C::kBrQ, kBc = C::kBcQ;
    constexpr int kNt = kBc / 8;  // n-tiles over keys (S, dP)
    constexpr int kKc = kBc / 16; // k-steps over keys (dQ)
    constexpr int kKd = D / 16;   // k-steps over dims (S, dP)
    constexpr int kDt = D / 8;    // n-tiles over dims (dQ)
    unsigned char* sm = m.smem();
    unsigned char* qs = sm;
    unsigned char* dos = sm + C::kTileQq;
    float* ls = reinterpret_cast<float*>(sm + C::kOffStatQ);
    float* ds = ls + kBr;
    int* rs = reinterpret_cast<int*>(ds + kBr);
    int* wmax = rs + kBr;
    int* scratch = wmax + kWarps;
    auto kbuf = [&](int j) { return sm + C::kOffBufQ + j * 2 * C::kTileKVq; };
    const int tid = m.tid(), lane = tid & 31, warp = tid >> 5;
    const QTile qt = q_tile<kBr, kBc, D>(m, p, bx, h, b, rs, wmax, scratch);
    const int t0 = qt.t0, nr = qt.nr, start0 = qt.start0, nkv = qt.nkv;
    const int start_last = qt.start_last;
    const size_t qcol = qt.qcol, kvcol = qt.kvcol;

    load_tile<kBr, D>(m, qs, p.q, p.ldq, qcol, b, t0, p);
    load_tile<kBr, D>(m, dos, p.dout, p.ldo, qcol, b, t0, p);
    load_stats<kBr>(m, ls, p.lse, p, b, h, t0);
    load_stats<kBr>(m, ds, p.delta, p, b, h, t0);
    load_tile<kBc, D>(m, kbuf(0), p.k, p.ldk, kvcol, b, start0, p);
    load_tile<kBc, D>(m, kbuf(0) + C::kTileKVq, p.v, p.ldv, kvcol, b, start0, p);
    m.cp_commit();

    const int row0 = warp * 16 + frag_c(lane, 0).row;
    const int rstart[2] = {rs[row0], rs[row0 + 8]};
    float lrow[2] = {0.0f, 0.0f}, drow[2] = {0.0f, 0.0f};
    float dq[kDt][4];
    zero(dq);
    uint32_t qf[kKd][4], df[kKd][4];

    for (int it = 0; it < nkv; it++) {
        const int c0 = start0 + it * kBc;
        m.cp_wait_all();
        m.sync();
        if (it == 0) {
            load_a<D>(m, qf, qs, warp * 16, lane);
            load_a<D>(m, df, dos, warp * 16, lane);
            SOF_UNROLL
            for (int i = 0; i < 2; i++) {
                lrow[i] = ls[row0 + 8 * i] * kLog2e;
                drow[i] = ds[row0 + 8 * i];
            }
        }
        if (it + 1 < nkv) {
            unsigned char* nb = kbuf((it + 1) & 1);
            load_tile<kBc, D>(m, nb, p.k, p.ldk, kvcol, b, c0 + kBc, p);
            load_tile<kBc, D>(m, nb + C::kTileKVq, p.v, p.ldv, kvcol, b, c0 + kBc, p);
            m.cp_commit();
        }
        const unsigned char* kts = kbuf(it & 1);
        const unsigned char* vts = kts + C::kTileKVq;

        float s[kNt][4], dp[kNt][4];
        zero(s);
        zero(dp);
        mma_tile<D, kNt, kKd, true>(m, s, qf, kts, lane);
        mma_tile<D, kNt, kKd, true>(m, dp, df, vts, lane);
        const bool full = tile_unmasked(t0, nr, kBr, c0, kBc, start_last);
        SOF_UNROLL
        for (int nt = 0; nt < kNt; nt++) {
            if constexpr (kDrop) {
                SOF_UNROLL
                for (int i = 0; i < 2; i++) {
                    float z0, z1;
                    drop_pair(p, b, h, t0 + row0 + 8 * i, c0 + nt * 8 + frag_c(lane, 2 * i).col, z0,
                              z1);
                    dp[nt][2 * i] *= z0;
                    dp[nt][2 * i + 1] *= z1;
                }
            }
            SOF_UNROLL
            for (int e = 0; e < 4; e++) {
                const int i = e >> 1;
                float pv = m.exp2(s[nt][e] * p.scale_log2 - lrow[i]);
                if (!full &&
                    !visible(t0 + row0 + 8 * i, c0 + nt * 8 + frag_c(lane, e).col, rstart[i]))
                    pv = 0.0f;
                s[nt][e] = pv * (dp[nt][e] - drow[i]); // dS
            }
        }
        uint32_t dsa[kKc][4];
        c_to_a<kNt>(m, dsa, s);
        mma_tile<D, kDt, kKc, false>(m, dq, dsa, kts, lane);
    }

    SOF_UNROLL
    for (int i = 0; i < 2; i++) {
        const int r = row0 + 8 * i;
        if (r >= nr) continue;
        store_row<kDt>(m, p.dq + row_index(p, b, t0 + r) * p.lddq + qcol, dq, i, p.scale, lane,
                       p.vec);
    }
}

} // namespace sof::kernels::cuda::flash
