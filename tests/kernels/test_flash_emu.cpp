// The tensor-core attention's tile code (lib/kernels/cuda/flash_fwd.cuh, flash_bwd.cuh), the very
// code the GPU kernels run, executed on the host by the warp emulator (warp_emu.h: mma.sync,
// ldmatrix, cp.async and shuffles from the PTX ISA's layouts) and compared with the CPU twin on
// the same bf16 values: T not a multiple of the tiles, causal, GQA, segments, both load paths,
// sliding window, sinks and dropout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/attention.h"
#include "kernels/attention_ref.h"
#include "kernels/cuda/flash_bwd.cuh"
#include "kernels/cuda/flash_fwd.cuh"
#include "kernels/matmul.h"
#include "warp_emu.h"

using namespace sof;
namespace fl = sof::kernels::cuda::flash;
namespace emu = sof::ktest::emu;
using test::AttnProblem;
using test::AttnShape;

namespace {

constexpr uint16_t kPoison = 0x7fc1; // a bf16 NaN: elements nothing wrote

struct Result {
    std::vector<float> out, lse, dqkv; // in the AttnProblem's layout (spare columns 0)
    bool all_written = true;           // no owned element left NaN
    bool spares_kept = true;           // no spare column written
    emu::Stats stats;
};

size_t round8(size_t x) {
    return (x + 7) / 8 * 8;
}

std::string name(const AttnShape& s, bool vec) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
           " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV) +
           " hd=" + std::to_string(s.hd) + (s.segments ? " segments" : "") +
           (s.window ? " window=" + std::to_string(s.window) : "") + (s.sinks ? " sinks" : "") +
           (s.dropout > 0 ? " dropout=" + std::to_string(s.dropout) : "") +
           (vec ? " 16-byte rows" : " element rows");
}

// Deliberate defects of the tile code's parameters (the comparison with the CPU twin must catch
// each): a band one key wider, the sinks left out, another dropout step.
enum class Feature { Ok, WindowPlusOne, NoSinks, OtherDropoutStep };

void add_stats(emu::Stats& a, const emu::Stats& b) {
    a.syncs += b.syncs;
    a.shuffles += b.shuffles;
    a.ldsm += b.ldsm;
    a.mma += b.mma;
    a.ldsm_conflicts += b.ldsm_conflicts;
    a.cp_async += b.cp_async;
}

// The forward, delta and backward of the tile code over the whole grid, on p's values rounded to
// bf16. vec: rows padded to multiples of 8 elements (the 16-byte cp.async path), else p's own
// strides (element loads and stores). kDrop: the dropout instantiation (p's dropout > 0).
template <int D, bool kDrop>
Result run_emu(const AttnProblem& p, bool vec, const emu::Options& o, Feature f) {
    const AttnShape& s = p.s;
    const size_t rows = static_cast<size_t>(s.B) * s.T;
    const size_t W = vec ? round8(p.W) : p.W, ldo = vec ? round8(p.ldo) : p.ldo;
    const size_t used_qkv = static_cast<size_t>(s.NH + 2 * s.NKV) * s.hd;
    const size_t used_o = static_cast<size_t>(s.NH) * s.hd;
    std::vector<uint16_t> qkv(rows * W, kPoison), dout(rows * ldo, kPoison);
    std::vector<uint16_t> out(rows * ldo, kPoison), dqkv(rows * W, kPoison);
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < used_qkv; i++)
            qkv[r * W + i] = core::f32_to_bf16(p.qkv[r * p.W + i]);
        for (size_t i = 0; i < used_o; i++)
            dout[r * ldo + i] = core::f32_to_bf16(p.dout[r * p.ldo + i]);
    }
    std::vector<float> lse(p.stat_size(), NAN), delta(p.stat_size(), NAN);

    fl::Params prm{};
    prm.q = qkv.data();
    prm.k = qkv.data() + p.koff();
    prm.v = qkv.data() + p.voff();
    prm.ldq = prm.ldk = prm.ldv = W;
    prm.seg = p.seg.empty() ? nullptr : p.seg.data();
    prm.B = s.B;
    prm.T = s.T;
    prm.NH = s.NH;
    prm.group = s.NH / s.NKV;
    prm.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    prm.scale_log2 = prm.scale * fl::kLog2e;
    prm.vec = vec;
    prm.out = out.data();
    prm.ldo = ldo;
    prm.lse_out = lse.data();
    prm.dout = dout.data();
    prm.lse = lse.data();
    prm.delta = delta.data();
    prm.dq = dqkv.data();
    prm.dk = dqkv.data() + p.koff();
    prm.dv = dqkv.data() + p.voff();
    prm.lddq = prm.lddk = prm.lddv = W;
    kernels::DropoutKey key = p.key;
    if (f == Feature::OtherDropoutStep) key.step++;
    prm.window = s.window + (f == Feature::WindowPlusOne ? 1 : 0);
    prm.sinks = p.sinks.empty() || f == Feature::NoSinks ? nullptr : p.sinks.data();
    prm.drop = kernels::detail::check_attention_features(prm.window, s.dropout, key, s.B, s.T, s.NH,
                                                         "emulated attention");
    REQUIRE(prm.drop.mask.active() == kDrop);
    auto inputs = [&](emu::Block& blk) {
        blk.add_global(qkv.data(), qkv.size() * 2, false);
        if (!p.seg.empty()) blk.add_global(p.seg.data(), p.seg.size() * 4, false);
        if (!p.sinks.empty()) blk.add_global(p.sinks.data(), p.sinks.size() * 4, false);
    };

    Result res;
    {
        emu::Block blk(fl::kThreads, fl::FwdCfg<D>::kSmem, o);
        inputs(blk);
        blk.add_global(out.data(), out.size() * 2, true);
        blk.add_global(lse.data(), lse.size() * 4, true);
        const int nqt = fl::ceil_div(s.T, fl::FwdCfg<D>::kBr);
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++)
                for (int bx = 0; bx < nqt; bx++)
                    blk.run([&](emu::Thread& t) { fl::fwd_block<D, kDrop>(t, prm, bx, h, b); });
        add_stats(res.stats, blk.stats());
    }
    // delta = rowsum(dout * out) (attention.cu's delta pass; here in double)
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++)
            for (int h = 0; h < s.NH; h++) {
                const size_t r =
                    (static_cast<size_t>(b) * s.T + t) * ldo + static_cast<size_t>(h) * D;
                double x = 0;
                for (int i = 0; i < D; i++)
                    x += static_cast<double>(core::bf16_to_f32(dout[r + i])) *
                         core::bf16_to_f32(out[r + i]);
                delta[(static_cast<size_t>(b) * s.NH + h) * s.T + t] = static_cast<float>(x);
            }
    {
        using C = fl::BwdCfg<D>;
        emu::Block kv(fl::kThreads, C::kSmemKV, o), q(fl::kThreads, C::kSmemQ, o);
        for (emu::Block* blk : {&kv, &q}) {
            inputs(*blk);
            blk->add_global(dout.data(), dout.size() * 2, false);
            blk->add_global(lse.data(), lse.size() * 4, false);
            blk->add_global(delta.data(), delta.size() * 4, false);
            blk->add_global(dqkv.data(), dqkv.size() * 2, true);
        }
        for (int b = 0; b < s.B; b++)
            for (int kh = 0; kh < s.NKV; kh++)
                for (int kt = 0; kt < fl::ceil_div(s.T, C::kBc); kt++)
                    kv.run([&](emu::Thread& t) { fl::dkdv_block<D, kDrop>(t, prm, kt, kh, b); });
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++)
                for (int bx = 0; bx < fl::ceil_div(s.T, C::kBrQ); bx++)
                    q.run([&](emu::Thread& t) { fl::dq_block<D, kDrop>(t, prm, bx, h, b); });
        add_stats(res.stats, kv.stats());
        add_stats(res.stats, q.stats());
    }

    res.out.assign(p.out_size(), 0.0f);
    res.dqkv.assign(p.qkv.size(), 0.0f);
    res.lse = lse;
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < ldo; i++) {
            const bool owned = i < used_o;
            const float x = core::bf16_to_f32(out[r * ldo + i]);
            if (owned) res.out[r * p.ldo + i] = x;
            res.all_written = res.all_written && (!owned || !std::isnan(x));
            res.spares_kept = res.spares_kept && (owned || out[r * ldo + i] == kPoison);
        }
        for (size_t i = 0; i < W; i++) {
            const bool owned = i < used_qkv;
            const float x = core::bf16_to_f32(dqkv[r * W + i]);
            if (owned) res.dqkv[r * p.W + i] = x;
            res.all_written = res.all_written && (!owned || !std::isnan(x));
            res.spares_kept = res.spares_kept && (owned || dqkv[r * W + i] == kPoison);
        }
    }
    for (float x : lse)
        res.all_written = res.all_written && !std::isnan(x);
    return res;
}

Result run_emu_any(const AttnProblem& p, bool vec, const emu::Options& o = {},
                   Feature f = Feature::Ok) {
    const bool drop = p.s.dropout > 0.0f;
    if (p.s.hd == 64)
        return drop ? run_emu<64, true>(p, vec, o, f) : run_emu<64, false>(p, vec, o, f);
    return drop ? run_emu<128, true>(p, vec, o, f) : run_emu<128, false>(p, vec, o, f);
}

// The CPU twin (fp32) on p's values; its backward gets the tile code's (bf16) out, as the op
// driver does, so delta agrees.
struct Cpu {
    std::vector<float> out, lse, dqkv;
};
Cpu run_cpu(const AttnProblem& p, const std::vector<float>& out_for_backward) {
    Cpu r;
    r.out.assign(p.out_size(), 0.0f);
    r.lse.assign(p.stat_size(), 0.0f);
    r.dqkv.assign(p.qkv.size(), 0.0f);
    std::vector<float> delta(p.stat_size());
    const auto a = p.args(p.qkv.data());
    kernels::cpu::attention_forward(r.out.data(), r.lse.data(), a);
    kernels::cpu::attention_backward(p.grads(r.dqkv.data()), p.dout.data(), out_for_backward.data(),
                                     r.lse.data(), delta.data(), a);
    return r;
}

// p with its inputs rounded to bf16 (both sides then compute on the same values)
AttnProblem rounded(const AttnShape& s) {
    AttnProblem p(s);
    for (float& x : p.qkv)
        x = core::round_bf16(x);
    for (float& x : p.dout)
        x = core::round_bf16(x);
    return p;
}

struct Errors {
    double out, lse, grad;
};
Errors errors(const AttnProblem& p, const Result& g) {
    const Cpu c = run_cpu(p, g.out);
    const auto om = test::attn_out_mask(p), qm = test::attn_qkv_mask(p);
    return {test::attn_norm_err(g.out, test::attn_widen(c.out), om),
            test::attn_norm_err(g.lse, test::attn_widen(c.lse)),
            test::attn_norm_err(g.dqkv, test::attn_widen(c.dqkv), qm)};
}

// Thresholds against the CPU twin (fp32 on the same bf16 inputs), normalized max error. The tile
// code rounds P to bf16 before P V (2^-9 relative per weight) and out to bf16 on store (2^-9):
// out within 2 * 2^-9 = 4e-3 of the largest |out|; 8e-3. The grads add dS and P^T rounded to
// bf16 before dK, dQ and dV, and the grads' own bf16 store: 2e-2 (cf. the CUDA-core kernel's
// 1e-2 in bf16, which rounds only on store): 1e-2. lse is fp32 from fp32 scores: 1e-5. Measured
// here (2026-12): out <= 3.0e-3, grads <= 2.9e-3, lse <= 1.8e-7.
constexpr double kTolOut = 8e-3, kTolGrad = 1e-2, kTolLse = 1e-5;

} // namespace

TEST_CASE("flash emulated: tile code equals the CPU twin (bf16, causal, GQA, segments, tails)" *
          doctest::test_suite("cpu")) {
    kernels::cpu::use_single_threaded_blas();
    const AttnShape shapes[] = {
        {1, 1, 2, 2, 64, false, 101},
        {2, 17, 4, 2, 64, true, 102},
        {1, 64, 2, 1, 128, false, 103},
        {1, 100, 4, 4, 64, true, 104},
        {1, 130, 2, 2, 128, true, 105},
        {2, 77, 4, 1, 128, false, 106},
        {1, 200, 2, 1, 64, false, 107},
        {1, 130, 2, 1, 64, true, 108,
         2147483647}, // a window of INT_MAX keys (= causal): no overflow
    };
    int k = 0;
    for (const AttnShape& s : shapes) {
        for (bool vec : {k % 2 == 0, k % 2 != 0}) {
            CAPTURE(name(s, vec));
            const AttnProblem p = rounded(s);
            const Result g = run_emu_any(p, vec);
            const Errors e = errors(p, g);
            MESSAGE(name(s, vec) << ": out " << e.out << " lse " << e.lse << " grads " << e.grad
                                 << " (mma " << g.stats.mma << ", ldmatrix conflicts "
                                 << g.stats.ldsm_conflicts << ")");
            CHECK(e.out < kTolOut);
            CHECK(e.lse < kTolLse);
            CHECK(e.grad < kTolGrad);
            CHECK(g.all_written);
            CHECK(g.spares_kept);
            CHECK(g.stats.ldsm_conflicts == 0);
            if (s.T > 1) break; // the second layout for T = 1 only (the rest alternate)
        }
        k++;
    }
}

TEST_CASE("flash emulated: the same bits whatever the thread order and copy timing" *
          doctest::test_suite("cpu")) {
    // A missing barrier or cp.async wait shows as a different result when the threads run in
    // another order or the copies land at another time (both are legal on a GPU).
    for (const AttnShape& s :
         {AttnShape{1, 150, 2, 1, 64, true, 111}, AttnShape{1, 90, 2, 2, 128, false, 112},
          AttnShape{1, 130, 2, 1, 64, true, 113, 50, true, 0.2f}}) {
        for (bool vec : {s.hd == 64}) { // one layout each
            CAPTURE(name(s, vec));
            const AttnProblem p = rounded(s);
            const Result a = run_emu_any(p, vec);
            for (bool reverse : {false, true}) {
                emu::Options other;
                other.schedule = emu::Options::Schedule::WarpAhead;
                other.reverse = reverse;
                other.late_copy = reverse;
                const Result b = run_emu_any(p, vec, other);
                CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
                CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
                CHECK(std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * 4) == 0);
            }
        }
    }
}

TEST_CASE("flash emulated: a wrong fragment layout fails the thresholds" *
          doctest::test_suite("cpu")) {
    const AttnProblem p = rounded({1, 70, 2, 1, 64, true, 121});
    for (auto d : {emu::Options::Defect::LdsmIgnoresTrans, emu::Options::Defect::MmaBTransposed}) {
        CAPTURE(static_cast<int>(d));
        emu::Options o;
        o.defect = d;
        const Errors e = errors(p, run_emu_any(p, true, o));
        CHECK(e.out > 10 * kTolOut);
        CHECK(e.grad > 10 * kTolGrad);
    }
}

TEST_CASE("flash emulated: document starts and ends of the block scans" *
          doctest::test_suite("cpu")) {
    std::mt19937 gen(131);
    for (int trial = 0; trial < 6; trial++) {
        // documents of 1 .. 700 tokens (longer than one scan step of 512 ids), ids cycling
        const int T = 1500;
        std::vector<int> seg(T), start(T), end(T);
        for (int t = 0, doc = 0; t < T; doc++) {
            const int len = 1 + static_cast<int>(gen() % (trial < 3 ? 700 : 40));
            for (int i = t; i < std::min(T, t + len); i++)
                seg[i] = doc % 3;
            t += len;
        }
        for (int t = 0; t < T; t++)
            start[t] = t > 0 && seg[t] == seg[t - 1] ? start[t - 1] : t;
        for (int t = T - 1; t >= 0; t--)
            end[t] = t + 1 < T && seg[t + 1] == seg[t] ? end[t + 1] : t + 1;
        emu::Block blk(fl::kThreads, 4096);
        blk.add_global(seg.data(), seg.size() * 4, false);
        for (int k = 0; k < 8; k++) {
            const int t = static_cast<int>(gen() % T), floor = k % 2 ? t / 2 : 0;
            const int window = k % 3 == 2 ? 50 : 0; // rows clamped to t - 50 + 1 too
            const int nr = std::min(64, T - t);
            std::vector<int> got_start(fl::kThreads), got_end(fl::kThreads), rs(64);
            blk.run([&](emu::Thread& th) {
                int* scratch = reinterpret_cast<int*>(th.smem());
                int* rsm = scratch + 8;
                got_start[th.tid()] = fl::block_run_start(th, seg.data(), t, floor, scratch);
                got_end[th.tid()] = fl::block_run_end(th, seg.data(), t, T, scratch);
                fl::row_starts<64>(th, rsm, scratch + 2, seg.data(), t, nr,
                                   std::max(start[t], floor), window);
                if (th.tid() < 64) rs[th.tid()] = rsm[th.tid()];
            });
            CAPTURE(t);
            CAPTURE(floor);
            for (int i = 0; i < fl::kThreads; i++) {
                REQUIRE(got_start[i] == std::max(start[t], floor));
                REQUIRE(got_end[i] == end[t]);
            }
            for (int i = 0; i < 64; i++) {
                if (i >= nr) { // past the last row (and past start's end: not read)
                    CHECK(rs[i] == fl::kNoRow);
                    continue;
                }
                const int want = std::max(start[t + i], floor);
                CHECK(rs[i] == (window ? std::max(want, t + i - window + 1) : want));
            }
        }
    }
}

// Sliding window (inside a tile, a tile wide, one key), sinks and dropout, alone and together with
// GQA and segments, both head dims and load paths; the grads include the dk/dv pass's early end
// at the window's reach.
TEST_CASE("flash emulated: window, sinks and dropout equal the CPU twin" *
          doctest::test_suite("cpu")) {
    kernels::cpu::use_single_threaded_blas();
    const AttnShape shapes[] = {
        {1, 200, 2, 1, 64, true, 141, 37},
        {2, 130, 4, 2, 128, false, 142, 64, true},
        {1, 150, 2, 2, 64, false, 143, 0, false, 0.2f},
        {1, 300, 4, 2, 64, true, 144, 100, true, 0.1f},
        {1, 77, 2, 1, 128, true, 145, 1, true, 0.5f},
    };
    int k = 0;
    for (const AttnShape& s : shapes) {
        const bool vec = k++ % 2 == 0;
        CAPTURE(name(s, vec));
        const AttnProblem p = rounded(s);
        const Result g = run_emu_any(p, vec);
        const Errors e = errors(p, g);
        MESSAGE(name(s, vec) << ": out " << e.out << " lse " << e.lse << " grads " << e.grad);
        CHECK(e.out < kTolOut);
        CHECK(e.lse < kTolLse);
        CHECK(e.grad < kTolGrad);
        CHECK(g.all_written);
        CHECK(g.spares_kept);
        CHECK(g.stats.ldsm_conflicts == 0);
    }
}

TEST_CASE("flash emulated: a wider band, a missing sink or another mask fails the thresholds" *
          doctest::test_suite("cpu")) {
    kernels::cpu::use_single_threaded_blas();
    const AttnProblem p = rounded({1, 140, 2, 1, 64, false, 151, 10, true, 0.3f});
    const Errors ok = errors(p, run_emu_any(p, true));
    CHECK(ok.out < kTolOut);
    CHECK(ok.grad < kTolGrad);
    const Errors w = errors(p, run_emu_any(p, true, {}, Feature::WindowPlusOne));
    CHECK(w.out > 5 * kTolOut);
    CHECK(w.grad > 5 * kTolGrad);
    const Errors z = errors(p, run_emu_any(p, true, {}, Feature::NoSinks));
    CHECK(z.out > 5 * kTolOut);
    CHECK(z.lse > 100 * kTolLse);
    const Errors d = errors(p, run_emu_any(p, true, {}, Feature::OtherDropoutStep));
    CHECK(d.out > 5 * kTolOut);
    CHECK(d.grad > 5 * kTolGrad);
}
