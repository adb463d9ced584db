// Op driver cases of attention.h, CPU twin (tiled FlashAttention-2): against the naive T x T
// reference in double over the shape classes, thread-count independence, mutations that must fail.
#include "attention_twins.h"
#include "harness.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

using namespace sof;
using test::AttnMutation;
using test::AttnProblem;
using test::AttnShape;

namespace {

// Thresholds (normalized max error, attn_norm_err), fp32 against double: the measured worst over
// the cases below is 1.7e-7 (out), 1.8e-7 (lse) and 4.1e-7 (grads), a few fp32 ulps (6e-8) from
// the sums over up to 1000 keys and 128 dims; the thresholds sit ~10x above that, well under the
// worst-case bound sqrt(T*hd)*eps ~ 2e-5. A mutated reference (one key of the causal mask or one
// document start off) moves the results by 0.5 or more.
constexpr double kTolOut = 2e-6, kTolLse = 2e-6, kTolGrad = 5e-6;

using Run = test::AttnRun;
using test::attn_name;
using test::attn_run_cpu;

// Every shape class at least once: T = 1, 7, 64, 129, 1000 (one tile, tile edges, many tiles);
// B = 1, 2; MHA and GQA 4:1, 8:2; hd 32, 64, 128, 80; with and without segments.
const AttnShape kShapes[] = {
    {2, 1, 2, 2, 32, false, 1},    {1, 1, 4, 1, 80, true, 2},      {2, 7, 4, 1, 64, true, 3},
    {1, 7, 8, 2, 128, false, 4},   {2, 64, 4, 4, 64, false, 5},    {1, 64, 8, 2, 80, true, 6},
    {1, 129, 4, 1, 128, true, 7},  {2, 129, 8, 2, 32, false, 8},   {1, 129, 4, 4, 64, true, 9},
    {1, 129, 2, 2, 48, false, 10}, {1, 1000, 4, 1, 64, false, 11}, {2, 1000, 8, 2, 32, true, 12},
};

} // namespace

SOF_OP_CPU("attention", "equals the naive T x T reference (forward and backward)") {
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(attn_name(s));
        const AttnProblem p(s);
        const test::AttnRef ref = test::attn_reference(p);
        const Run r = attn_run_cpu(p);
        const std::vector<char> om = test::attn_out_mask(p), qm = test::attn_qkv_mask(p);
        CHECK(test::attn_norm_err(r.out, ref.out, om) < kTolOut);
        CHECK(test::attn_norm_err(r.lse, ref.lse) < kTolLse);
        CHECK(test::attn_norm_err(r.dqkv, ref.dqkv, qm) < kTolGrad);
        // every owned element written (no NaN left), the spare columns untouched
        size_t nan_owned = 0, written_spare = 0;
        for (size_t i = 0; i < r.dqkv.size(); i++) {
            if (qm[i] && std::isnan(r.dqkv[i])) nan_owned++;
            if (!qm[i] && !std::isnan(r.dqkv[i])) written_spare++;
        }
        for (size_t i = 0; i < r.out.size(); i++) {
            if (om[i] && std::isnan(r.out[i])) nan_owned++;
            if (!om[i] && !std::isnan(r.out[i])) written_spare++;
        }
        CHECK(nan_owned == 0);
        CHECK(written_spare == 0);
    }
}

SOF_OP_CPU("attention", "a mutated reference fails the same thresholds") {
    kernels::cpu::use_single_threaded_blas();
    const AttnProblem p({1, 129, 4, 1, 64, true, 21});
    const Run r = attn_run_cpu(p);
    const std::vector<char> om = test::attn_out_mask(p), qm = test::attn_qkv_mask(p);
    const test::AttnRef causal = test::attn_reference(p, AttnMutation::CausalPlusOne);
    CHECK(test::attn_norm_err(r.out, causal.out, om) > 100 * kTolOut);
    CHECK(test::attn_norm_err(r.dqkv, causal.dqkv, qm) > 100 * kTolGrad);
    const test::AttnRef segs = test::attn_reference(p, AttnMutation::SegmentStartMinusOne);
    CHECK(test::attn_norm_err(r.out, segs.out, om) > 100 * kTolOut);
    CHECK(test::attn_norm_err(r.dqkv, segs.dqkv, qm) > 100 * kTolGrad);
}

SOF_OP_CPU("attention", "bitwise the same for 1 and 2 OpenMP threads") {
    kernels::cpu::use_single_threaded_blas();
    const int saved = omp_get_max_threads();
    for (const AttnShape& s :
         {AttnShape{2, 300, 8, 2, 64, true, 31}, AttnShape{1, 257, 4, 4, 80, false, 32}}) {
        CAPTURE(attn_name(s));
        const AttnProblem p(s);
        omp_set_num_threads(1);
        const Run one = attn_run_cpu(p);
        omp_set_num_threads(2);
        const Run two = attn_run_cpu(p);
        CHECK(std::memcmp(one.out.data(), two.out.data(), one.out.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(one.lse.data(), two.lse.data(), one.lse.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(one.dqkv.data(), two.dqkv.data(), one.dqkv.size() * sizeof(float)) == 0);
    }
    omp_set_num_threads(saved);
}

// T = 2^17: its T x T fp32 scores would be 64 GiB, more than this machine has. Documents of at most
// 128 tokens keep the work small; each checked document equals the reference run on it alone.
SOF_OP_CPU("attention", "a sequence whose T x T scores would not fit in memory") {
    kernels::cpu::use_single_threaded_blas();
    const int T = 1 << 17, NH = 2, hd = 32, doc = 128;
    AttnProblem p({1, T, NH, NH, hd, false, 41});
    p.seg.resize(T);
    for (int t = 0; t < T; t++)
        p.seg[t] = (t / doc) % 2; // runs of 128 tokens
    const Run r = attn_run_cpu(p);
    for (int d : {0, 1, T / doc / 2, T / doc - 1}) {
        CAPTURE(d);
        // the same document as a problem of its own (no segments)
        AttnProblem one({1, doc, NH, NH, hd, false, 0});
        const size_t r0 = static_cast<size_t>(d) * doc;
        std::copy(p.qkv.begin() + r0 * p.W, p.qkv.begin() + (r0 + doc) * p.W, one.qkv.begin());
        std::copy(p.dout.begin() + r0 * p.ldo, p.dout.begin() + (r0 + doc) * p.ldo,
                  one.dout.begin());
        const test::AttnRef ref = test::attn_reference(one);
        const std::vector<float> out(r.out.begin() + r0 * p.ldo,
                                     r.out.begin() + (r0 + doc) * p.ldo);
        const std::vector<float> dqkv(r.dqkv.begin() + r0 * p.W, r.dqkv.begin() + (r0 + doc) * p.W);
        CHECK(test::attn_norm_err(out, ref.out, test::attn_out_mask(one)) < kTolOut);
        CHECK(test::attn_norm_err(dqkv, ref.dqkv, test::attn_qkv_mask(one)) < kTolGrad);
    }
}

SOF_OP_CPU("attention", "shapes it cannot run are refused by name") {
    const AttnProblem p({1, 8, 4, 3, 32, false, 51});
    std::vector<float> out(p.out_size()), lse(p.stat_size());
    try {
        kernels::attention_forward(kernels::cpu_exec(), out.data(), lse.data(),
                                   p.args(p.qkv.data()));
        FAIL("no error for num_heads=4, num_kv_heads=3");
    } catch (const core::Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find("num_heads=4") != std::string::npos);
        CHECK(msg.find("num_kv_heads=3") != std::string::npos);
    }
}

SOF_OP_CPU("attention", "row strides shorter than the heads and q_begin outside 0..T are refused") {
    const AttnProblem p({1, 8, 4, 2, 32, false, 52});
    std::vector<float> out(p.out_size()), lse(p.stat_size());
    auto refused = [&](kernels::AttnArgs<float> a, const char* what) {
        try {
            kernels::attention_forward(kernels::cpu_exec(), out.data(), lse.data(), a);
            FAIL("no error for " << what);
        } catch (const core::Error& e) {
            CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
        }
    };
    kernels::AttnArgs<float> a = p.args(p.qkv.data());
    a.ldk = 2 * 32 - 1; // two kv heads of 32 need 64
    refused(a, "ldk=63");
    a = p.args(p.qkv.data());
    a.ldo = 4 * 32 - 8;
    refused(a, "ldo=120");
    a = p.args(p.qkv.data());
    a.q_begin = 9;
    refused(a, "q_begin = 9 outside 0..T = 8");
}

// Decoding with a KV cache: q_begin = k computes only rows k..T-1, the rows of the full forward
// (within rounding: the key tiles end elsewhere), and leaves the rows before it alone.
SOF_OP_CPU("attention", "q_begin computes the last rows only, equal to the full forward") {
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s :
         {AttnShape{1, 300, 4, 2, 32, false, 61}, AttnShape{2, 140, 4, 4, 64, true, 62}}) {
        CAPTURE(attn_name(s));
        const AttnProblem p(s);
        std::vector<float> full(p.out_size()), lse(p.stat_size());
        kernels::attention_forward(kernels::cpu_exec(), full.data(), lse.data(),
                                   p.args(p.qkv.data()));
        for (int q0 : {s.T - 1, s.T - 7, 130}) {
            CAPTURE(q0);
            std::vector<float> part(p.out_size(), 12345.0f), lse2(p.stat_size());
            kernels::AttnArgs<float> a = p.args(p.qkv.data());
            a.q_begin = q0;
            kernels::attention_forward(kernels::cpu_exec(), part.data(), lse2.data(), a);
            for (int b = 0; b < s.B; b++)
                for (int t = 0; t < s.T; t++) {
                    const size_t r = (static_cast<size_t>(b) * s.T + t) * p.ldo;
                    for (size_t i = 0; i < static_cast<size_t>(s.NH) * s.hd; i++) {
                        const bool ok = t >= q0 ? std::fabs(part[r + i] - full[r + i]) <= 1e-6f
                                                : part[r + i] == 12345.0f;
                        REQUIRE(ok);
                    }
                }
        }
    }
}
