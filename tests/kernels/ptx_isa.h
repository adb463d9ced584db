// The PTX ISA's layouts for mma.m16n8k16 (.bf16, f32 accumulators) and ldmatrix .m8n8 .b16,
// transcribed from the ISA's text, independently of lib/kernels/cuda/flash_layout.cuh: the
// layout tests compare the two, and the warp emulator (warp_emu.h) executes with these.
#pragma once

namespace sof::ktest::isa {

struct Elem {
    int row, col;
};

// PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type":
//   groupID = %laneid >> 2, threadID_in_group = %laneid % 4
// Multiplicand A (.f16/.bf16): four .f16x2 registers, elements a0..a7 (low to high);
//   row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise
//   col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4, + 8 for ai where i >= 4
inline Elem mma_a(int laneid, int i) {
    const int groupID = laneid >> 2, threadID_in_group = laneid % 4;
    const int row = ((0 <= i && i < 2) || (4 <= i && i < 6)) ? groupID : groupID + 8;
    const int col = (threadID_in_group * 2) + (i & 0x1) + (i >= 4 ? 8 : 0);
    return {row, col};
}
// Multiplicand B (.f16/.bf16): two .f16x2 registers, elements b0..b3;
//   row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2, + 8 for bi where i >= 2
//   col = groupID
inline Elem mma_b(int laneid, int i) {
    const int groupID = laneid >> 2, threadID_in_group = laneid % 4;
    const int row = (threadID_in_group * 2) + (i & 0x1) + (i >= 2 ? 8 : 0);
    return {row, groupID};
}
// Accumulators C/D (.f32): four .f32 registers c0..c3;
//   row = groupID for ci where i < 2, groupID + 8 for ci where i >= 2
//   col = (threadID_in_group * 2) + (i & 0x1)
inline Elem mma_c(int laneid, int i) {
    const int groupID = laneid >> 2, threadID_in_group = laneid % 4;
    return {i < 2 ? groupID : groupID + 8, (threadID_in_group * 2) + (i & 0x1)};
}

// PTX ISA 9.7.14.5.15 ldmatrix, .shape .m8n8 .type .b16: for .x4, threads 0-7 give the row
// addresses of the first matrix (addr0..addr7), 8-15 of the second, 16-23 of the third, 24-31
// of the fourth; destination register j receives a fragment of matrix j; in each 8x8 matrix
// "row = %laneid >> 2, col = (%laneid % 4) * 2 + i" for the two 16-bit elements i = 0, 1 of a
// register (low half first). With .trans the matrix is loaded column-major: the same fragment
// position holds element (col, row) of the matrix as stored.
inline int ldsm_addr_lane(int matrix, int row) {
    return 8 * matrix + row;
}
inline Elem ldsm_frag(int laneid, int i, bool trans) {
    const int row = laneid >> 2, col = (laneid % 4) * 2 + i;
    return trans ? Elem{col, row} : Elem{row, col};
}

} // namespace sof::ktest::isa
