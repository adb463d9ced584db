// The index math of the tensor-core attention (lib/kernels/cuda/flash_layout.cuh) against the PTX
// ISA's fragment and ldmatrix layouts (ptx_isa.h), the swizzle's bank behaviour, the masks
// against brute force and the block order (host only; label unit).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/cuda/flash_layout.cuh"
#include "ptx_isa.h"

using namespace sof::kernels::cuda::flash;
namespace isa = sof::ktest::isa;

namespace {

// A tile as it sits in shared memory (swizzled), element (r, c) holding the code r * 1000 + c.
struct Tile {
    int R, D;
    std::vector<unsigned char> bytes;
    Tile(int rows, int d) : R(rows), D(d), bytes(static_cast<size_t>(rows) * d * 2) {
        for (int r = 0; r < R; r++)
            for (int c = 0; c < D; c++) {
                const uint16_t v = static_cast<uint16_t>(r * 1000 + c);
                std::memcpy(bytes.data() + swz_offset(r, c, D), &v, 2);
            }
    }
    // ldmatrix .x4 as the ISA describes it, each lane pointing at (row, col) of the tile
    template <class Src> void ldsm(Src src, bool trans, uint16_t (&out)[32][4][2]) const {
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 4; j++)
                for (int h = 0; h < 2; h++) {
                    const isa::Elem e = isa::ldsm_frag(lane, h, trans);
                    const RC a = src(isa::ldsm_addr_lane(j, e.row));
                    uint16_t v;
                    std::memcpy(&v, bytes.data() + swz_offset(a.row, a.col, D) + 2 * e.col, 2);
                    out[lane][j][h] = v;
                }
    }
};

uint16_t code(int r, int c) {
    return static_cast<uint16_t>(r * 1000 + c);
}

} // namespace

TEST_CASE("flash layout: mma.m16n8k16 fragments are the PTX ISA's" * doctest::test_suite("cpu")) {
    std::set<int> a, b, c;
    for (int lane = 0; lane < 32; lane++) {
        for (int reg = 0; reg < 4; reg++)
            for (int h = 0; h < 2; h++) {
                const RC x = frag_a(lane, reg, h);
                const isa::Elem e = isa::mma_a(lane, 2 * reg + h);
                CHECK(x.row == e.row);
                CHECK(x.col == e.col);
                a.insert(x.row * 16 + x.col);
            }
        for (int reg = 0; reg < 2; reg++)
            for (int h = 0; h < 2; h++) {
                const RC x = frag_b(lane, reg, h);
                const isa::Elem e = isa::mma_b(lane, 2 * reg + h);
                CHECK(x.row == e.row);
                CHECK(x.col == e.col);
                b.insert(x.row * 8 + x.col);
            }
        for (int i = 0; i < 4; i++) {
            const RC x = frag_c(lane, i);
            const isa::Elem e = isa::mma_c(lane, i);
            CHECK(x.row == e.row);
            CHECK(x.col == e.col);
            c.insert(x.row * 8 + x.col);
        }
    }
    CHECK(a.size() == 256); // every element of A, B, C held exactly once
    CHECK(b.size() == 128);
    CHECK(c.size() == 128);
}

TEST_CASE("flash layout: a score tile's C fragments are the A fragments of P" *
          doctest::test_suite("cpu")) {
    // columns 0..15 of the scores = n-tiles 0 and 1; A element (row, col) must be C element
    // (row, col - 8 * tile) of n-tile a_from_c_tile(reg)
    for (int lane = 0; lane < 32; lane++)
        for (int reg = 0; reg < 4; reg++)
            for (int h = 0; h < 2; h++) {
                const isa::Elem want = isa::mma_a(lane, 2 * reg + h);
                const int tile = a_from_c_tile(reg);
                const isa::Elem got = isa::mma_c(lane, a_from_c_elem(reg, h));
                CHECK(got.row == want.row);
                CHECK(got.col + 8 * tile == want.col);
            }
}

TEST_CASE("flash layout: ldmatrix addresses give the mma fragments (A, B, B through .trans)" *
          doctest::test_suite("cpu")) {
    for (int D : {64, 128}) {
        const Tile t(64, D);
        uint16_t got[32][4][2];
        for (int m0 : {0, 16, 48})
            for (int k0 = 0; k0 < D; k0 += 16) {
                CAPTURE(D);
                CAPTURE(m0);
                CAPTURE(k0);
                // A rows m0.., columns k0.. (Q, dout, K, V as the left operand)
                t.ldsm([&](int lane) { return ldsm_a_src(lane, m0, k0); }, false, got);
                for (int lane = 0; lane < 32; lane++)
                    for (int i = 0; i < 8; i++) {
                        const isa::Elem e = isa::mma_a(lane, i);
                        CHECK(got[lane][i / 2][i % 2] == code(m0 + e.row, k0 + e.col));
                    }
                // B[k][n] = tile[n][k]: n0 = m0 (rows), k0 (columns), two n8 blocks
                t.ldsm([&](int lane) { return ldsm_b_src(lane, m0, k0); }, false, got);
                for (int lane = 0; lane < 32; lane++)
                    for (int blk = 0; blk < 2; blk++)
                        for (int i = 0; i < 4; i++) {
                            const isa::Elem e = isa::mma_b(lane, i); // (k, n)
                            CHECK(got[lane][2 * blk + i / 2][i % 2] ==
                                  code(m0 + 8 * blk + e.col, k0 + e.row));
                        }
            }
        // B[k][n] = tile[k][n] through .trans: k0 = rows, n0 = columns
        for (int k0 : {0, 16, 48})
            for (int n0 = 0; n0 < D; n0 += 16) {
                CAPTURE(D);
                CAPTURE(k0);
                CAPTURE(n0);
                t.ldsm([&](int lane) { return ldsm_bt_src(lane, k0, n0); }, true, got);
                for (int lane = 0; lane < 32; lane++)
                    for (int blk = 0; blk < 2; blk++)
                        for (int i = 0; i < 4; i++) {
                            const isa::Elem e = isa::mma_b(lane, i);
                            CHECK(got[lane][2 * blk + i / 2][i % 2] ==
                                  code(k0 + e.row, n0 + 8 * blk + e.col));
                        }
            }
    }
    // ldsm_supplies / ldsm_receives restate the ISA's description
    for (int lane = 0; lane < 32; lane++) {
        CHECK(isa::ldsm_addr_lane(ldsm_supplies(lane).row, ldsm_supplies(lane).col) == lane);
        for (int h = 0; h < 2; h++)
            for (bool tr : {false, true}) {
                const RC x = ldsm_receives(lane, h, tr);
                const isa::Elem e = isa::ldsm_frag(lane, h, tr);
                CHECK(x.row == e.row);
                CHECK(x.col == e.col);
            }
    }
}

TEST_CASE("flash layout: the swizzle is a bijection without bank conflicts" *
          doctest::test_suite("cpu")) {
    for (int D : {64, 128}) {
        const int R = 64, chunks = D / 8;
        std::set<int> slots;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < chunks; c++) {
                const int off = swz_offset(r, c * 8, D);
                CHECK(off % 16 == 0);
                CHECK(off >= r * D * 2); // stays in its row
                CHECK(off < (r + 1) * D * 2);
                slots.insert(off / 16);
                for (int e = 1; e < 8; e++) // a chunk's elements are contiguous
                    CHECK(swz_offset(r, c * 8 + e, D) == off + 2 * e);
            }
        CHECK(static_cast<int>(slots.size()) == R * chunks);
        // an ldmatrix phase: 8 consecutive rows, the same chunk; a row store: 8 chunks of a row
        for (int r0 = 0; r0 + 8 <= R; r0++)
            for (int c = 0; c < chunks; c++) {
                int banks = 0, row_banks = 0;
                for (int i = 0; i < 8; i++) {
                    banks |= 1 << ((swz_offset(r0 + i, c * 8, D) / 16) % 8);
                    row_banks |= 1 << ((swz_offset(r0, ((c & ~7) + i) * 8, D) / 16) % 8);
                }
                CHECK(banks == 0xff);
                CHECK(row_banks == 0xff);
            }
    }
}

TEST_CASE("flash layout: masks and key-tile counts against brute force" *
          doctest::test_suite("cpu")) {
    std::mt19937 gen(17);
    for (int trial = 0; trial < 2000; trial++) {
        const int br = 64, bc = (trial % 2) ? 64 : 32;
        const int T = 1 + static_cast<int>(gen() % 300);
        // ascending document starts (ids change at random positions)
        std::vector<int> start(static_cast<size_t>(T));
        for (int t = 0; t < T; t++)
            start[t] = (t == 0 || gen() % 7 != 0) ? (t == 0 ? 0 : start[t - 1]) : t;
        const int t0 = static_cast<int>(gen() % T) / br * br;
        const int nr = std::min(br, T - t0);
        const int c0 = static_cast<int>(gen() % T);
        bool all = nr == br;
        for (int i = 0; i < nr; i++)
            for (int c = c0; c < c0 + bc; c++)
                all = all && visible(t0 + i, c, start[t0 + i]);
        CHECK(tile_unmasked(t0, nr, br, c0, bc, start[t0 + nr - 1]) == all);
        for (int c = 0; c < T; c++)
            for (int t : {t0, t0 + nr - 1})
                CHECK(visible(t, c, start[t]) == (c >= start[t] && c <= t));
        CHECK_FALSE(visible(t0, 0, kNoRow));
        // key tiles from start0 cover start0 .. last exactly
        const int s0 = start[t0], last = t0 + nr - 1, n = kv_tile_count(s0, last, bc);
        CHECK(n * bc >= last - s0 + 1);
        CHECK((n - 1) * bc < last - s0 + 1);
    }
    for (int nqt : {1, 2, 17}) {
        std::set<int> tiles;
        for (int bx = 0; bx < nqt; bx++)
            tiles.insert(q_tile_of_block(bx, nqt));
        CHECK(static_cast<int>(tiles.size()) == nqt);
        CHECK(*tiles.begin() == 0);
        CHECK(q_tile_of_block(0, nqt) == nqt - 1); // the longest rows first
    }
}
