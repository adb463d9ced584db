// Index math of the tensor-core attention (flash_*.cuh), host and device code: which lane and
// register hold which element of an mma.m16n8k16 bf16 fragment, ldmatrix's row addresses, the
// shared-memory swizzle, the tile masks and the block order. Host-tested (test_flash_layout.cpp).
#pragma once

#include <climits>
#include <cstdint>

#include "core/dtype.h" // SOF_HD: inline on the host, __host__ __device__ under nvcc

namespace sof::kernels::cuda::flash {

// An element of a matrix: (row, column).
struct RC {
    int row, col;
};

// ---- mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"). g = lane / 4 (groupID), t = lane % 4
// (threadID_in_group). Each .b32 register holds two bf16: the lower-numbered element in the low
// 16 bits.

// A (16 x 16, M x K): registers 0..3 hold a0..a7; register r, half h is a_{2r+h}.
SOF_HD RC frag_a(int lane, int reg, int half) {
    return {(lane >> 2) + 8 * (reg & 1), 2 * (lane & 3) + half + 8 * (reg >> 1)};
}
// B (16 x 8, K x N): registers 0..1 hold b0..b3; register r, half h is b_{2r+h}.
SOF_HD RC frag_b(int lane, int reg, int half) {
    return {2 * (lane & 3) + half + 8 * reg, lane >> 2};
}
// C and D (16 x 8 fp32): c0..c3, one per register.
SOF_HD RC frag_c(int lane, int i) {
    return {(lane >> 2) + 8 * (i >> 1), 2 * (lane & 3) + (i & 1)};
}

// The A fragment of k-step kk (columns 16kk..16kk+15) built from the C fragments of n-tiles 2kk
// and 2kk+1 of the same rows (a score tile reused as the left operand): register r packs
// c[ntile][2*(r&1)] (low) and c[ntile][2*(r&1)+1] (high) of n-tile 2kk + (r >> 1).
SOF_HD int a_from_c_tile(int reg) {
    return reg >> 1;
}
SOF_HD int a_from_c_elem(int reg, int half) {
    return 2 * (reg & 1) + half;
}

// ---- ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane L gives the address of row L % 8
// of matrix L / 8; register j of each lane receives part of matrix j.

// The 8x8 matrix a lane supplies an address for: {matrix, row}.
SOF_HD RC ldsm_supplies(int lane) {
    return {lane >> 3, lane & 7};
}
// Which element of its matrix register j of lane receives (half h: the low or high 16 bits), as
// (row, col) of the matrix as stored (rows = the 8 supplied addresses). Without .trans: row
// L / 4, columns 2 (L % 4) + h; with .trans the stored matrix is transposed on the way.
SOF_HD RC ldsm_receives(int lane, int half, bool trans) {
    const RC e{lane >> 2, 2 * (lane & 3) + half};
    return trans ? RC{e.col, e.row} : e;
}

// Where lane points ldmatrix.x4 (row of the tile, first column of its 8-element chunk) so that
// the four registers are, for a row-major tile (rows contiguous in memory):
// - ldsm_a_src: the A fragment of rows m0..m0+15, columns k0..k0+15 (no .trans);
// - ldsm_b_src: the B fragments of two n8 blocks from a tile whose rows are n, columns k
//   (B[k][n] = tile[n][k], e.g. K for Q K^T): registers {0,1} for n0..n0+7, {2,3} for
//   n0+8..n0+15, columns k0..k0+15 (no .trans);
// - ldsm_bt_src: the same from a tile whose rows are k, columns n (B[k][n] = tile[k][n], e.g. V
//   for P V), with .trans.
SOF_HD RC ldsm_a_src(int lane, int m0, int k0) {
    const int j = lane >> 3, r = lane & 7;
    return {m0 + r + 8 * (j & 1), k0 + 8 * (j >> 1)};
}
SOF_HD RC ldsm_b_src(int lane, int n0, int k0) {
    const int j = lane >> 3, r = lane & 7;
    return {n0 + r + 8 * (j >> 1), k0 + 8 * (j & 1)};
}
SOF_HD RC ldsm_bt_src(int lane, int k0, int n0) {
    const int j = lane >> 3, r = lane & 7;
    return {k0 + r + 8 * (j & 1), n0 + 8 * (j >> 1)};
}

// ---- shared-memory tiles: R rows of D bf16 (D a multiple of 64: 128-byte rows or longer), in
// 16-byte chunks; chunk c of row r is stored at chunk c ^ (r % 8) of the row. The 8 rows an
// ldmatrix phase reads (same logical chunk, 8 consecutive rows) and the 8 chunks of a row then
// fall in 8 different 16-byte bank groups: no bank conflicts.
SOF_HD int swz_offset(int row, int col, int D) { // bytes from the tile start
    const int chunk = col >> 3;
    return row * D * 2 + ((chunk ^ (row & 7)) << 4) + ((col & 7) << 1);
}

// ---- masks. Query row t sees key c iff start_t <= c <= t, start_t the first key of its
// document (0 without segments, kNoRow for a padding row past T).
constexpr int kNoRow = INT_MAX;
SOF_HD bool visible(int t, int c, int start_t) {
    return c <= t && c >= start_t;
}
// True when every query row of [t0, t0 + br) exists (nr == br) and sees every key of
// [c0, c0 + bc): the tile runs without a mask. start_last: start of row t0 + br - 1 (starts
// ascend with t, so it is the largest).
SOF_HD bool tile_unmasked(int t0, int nr, int br, int c0, int bc, int start_last) {
    return nr == br && c0 + bc - 1 <= t0 && start_last <= c0;
}

// ---- block order. Forward and dq: block x of the grid handles query tile nqt - 1 - x (the last
// tiles see the most keys under the causal mask: they start first). dk/dv: block x handles key
// tile x (the first tiles are seen by the most query rows).
SOF_HD int q_tile_of_block(int bx, int nqt) {
    return nqt - 1 - bx;
}
SOF_HD int ceil_div(int n, int d) {
    return (n + d - 1) / d;
}
// Key tiles of bc keys from start0 through last (the query tile's last row): start0 is the
// document start of the tile's first row.
SOF_HD int kv_tile_count(int start0, int last, int bc) {
    return last < start0 ? 0 : (last - start0 + bc) / bc;
}

} // namespace sof::kernels::cuda::flash
