// CPU twin of grouped_matmul.h: each expert's products on gemm.h's fixed tiles, the tiles of all
// experts in one OpenMP loop (no thread idles behind a small expert); bias sums rows in order.
#include "kernels/grouped_matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/gemm.h"

namespace sof::kernels {

void check_grouped_shape(const GroupedShape& s, const char* op) {
    if (s.E < 1 || s.C < 1 || s.OC < 1)
        SOF_FAIL(Usage, "%s: bad shape E=%d C=%d OC=%d (each must be >= 1)", op, s.E, s.C, s.OC);
    if (!s.host_offsets) SOF_FAIL(Usage, "%s: host_offsets is required", op);
    if (s.host_offsets[0] != 0)
        SOF_FAIL(Usage, "%s: host_offsets[0] = %d, must be 0", op, s.host_offsets[0]);
    for (int e = 0; e < s.E; e++)
        if (s.host_offsets[e + 1] < s.host_offsets[e])
            SOF_FAIL(Usage, "%s: host_offsets decrease at expert %d (%d then %d)", op, e,
                     s.host_offsets[e], s.host_offsets[e + 1]);
}

namespace cpu {

namespace {

// Runs every tile of every product of gs in one OpenMP loop (tile t of the concatenation).
void run_tiles(const std::vector<Gemm>& gs) {
    std::vector<int> first(gs.size() + 1, 0);
    for (size_t i = 0; i < gs.size(); i++)
        first[i + 1] = first[i] + gemm_tiles(gs[i]);
    const int total = first.back();
#pragma omp parallel for schedule(static)
    for (int t = 0; t < total; t++) {
        const size_t i =
            static_cast<size_t>(std::upper_bound(first.begin(), first.end(), t) - first.begin()) -
            1;
        gemm_tile(gs[i], t - first[i]);
    }
}

} // namespace

void grouped_matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                            const GroupedShape& s) {
    const int* off = s.host_offsets;
    const size_t wsz = static_cast<size_t>(s.OC) * s.C;
    if (bias) {
        const int P = off[s.E];
#pragma omp parallel for schedule(static)
        for (int r = 0; r < P; r++) {
            const int e = static_cast<int>(std::upper_bound(off, off + s.E + 1, r) - off) - 1;
            std::memcpy(out + static_cast<size_t>(r) * s.OC, bias + static_cast<size_t>(e) * s.OC,
                        sizeof(float) * s.OC);
        }
    }
    std::vector<Gemm> gs;
    for (int e = 0; e < s.E; e++) {
        const int rows = off[e + 1] - off[e];
        if (rows == 0) continue;
        Gemm g; // (rows, OC) = inp (rows, C) @ w[e]^T
        g.trans_b = true;
        g.M = rows;
        g.N = s.OC;
        g.K = s.C;
        g.A = inp + static_cast<size_t>(off[e]) * s.C;
        g.lda = s.C;
        g.B = w + static_cast<size_t>(e) * wsz;
        g.ldb = s.C;
        g.beta = bias ? 1.0f : 0.0f;
        g.C = out + static_cast<size_t>(off[e]) * s.OC;
        g.ldc = s.OC;
        gs.push_back(g);
    }
    run_tiles(gs);
}

void grouped_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                             const float* inp, const float* w, const GroupedShape& s) {
    const int* off = s.host_offsets;
    const size_t wsz = static_cast<size_t>(s.OC) * s.C;
    std::vector<Gemm> gs;
    for (int e = 0; e < s.E; e++) {
        const int rows = off[e + 1] - off[e];
        if (rows == 0) continue;
        const float* d = dout + static_cast<size_t>(off[e]) * s.OC;
        const float* x = inp + static_cast<size_t>(off[e]) * s.C;
        if (dinp) {
            Gemm g; // dinp (rows, C) = dout (rows, OC) @ w[e] (OC, C)
            g.M = rows;
            g.N = s.C;
            g.K = s.OC;
            g.A = d;
            g.lda = s.OC;
            g.B = w + static_cast<size_t>(e) * wsz;
            g.ldb = s.C;
            g.C = dinp + static_cast<size_t>(off[e]) * s.C;
            g.ldc = s.C;
            gs.push_back(g);
        }
        Gemm g; // dw[e] (OC, C) += dout^T (OC, rows) @ inp (rows, C)
        g.trans_a = true;
        g.M = s.OC;
        g.N = s.C;
        g.K = rows;
        g.A = d;
        g.lda = s.OC;
        g.B = x;
        g.ldb = s.C;
        g.beta = 1.0f;
        g.C = dw + static_cast<size_t>(e) * wsz;
        g.ldc = s.C;
        gs.push_back(g);
    }
    run_tiles(gs);
    if (!dbias) return;
    const int nblk = (s.OC + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for collapse(2) schedule(static)
    for (int e = 0; e < s.E; e++) {
        for (int blk = 0; blk < nblk; blk++) {
            const int c0 = blk * kChanBlock, c1 = std::min(s.OC, c0 + kChanBlock);
            float* db = dbias + static_cast<size_t>(e) * s.OC;
            for (int r = off[e]; r < off[e + 1]; r++) {
                const float* d = dout + static_cast<size_t>(r) * s.OC;
                for (int c = c0; c < c1; c++)
                    db[c] += d[c];
            }
        }
    }
}

} // namespace cpu

} // namespace sof::kernels
