// Op driver cases of dropout.h: the CPU twin against the key as documented (Philox words written
// out here), keep rate and scale within binomial sigmas, independence of the work split and of
// the key's fields, refusals; the CUDA twin bitwise against the CPU twin (fp32) and in bf16.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "harness.h"
#include "kernels/dropout.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    int B, T, C;
};
// one row of one element, C not a multiple of 4 (draws straddle rows), a realistic width
const Shape kShapes[] = {{1, 1, 1}, {2, 7, 37}, {3, 50, 256}, {1, 1000, 513}};

kernels::DropoutKey test_key(uint32_t salt) {
    kernels::DropoutKey k;
    k.seed = 0x1234567890abcdefull + salt;
    k.step = 77 + salt;
    k.micro = 2;
    k.layer = 5;
    k.tag = kernels::DropoutTag::ResidualAttn;
    k.batch0 = 3;
    k.token0 = 4;
    k.tokens = 0; // set per shape: T + 9
    return k;
}

kernels::DropoutArgs make_args(const Shape& s, float p, uint32_t salt) {
    kernels::DropoutArgs a{s.B, s.T, s.C, p, test_key(salt)};
    a.key.tokens = s.T + 9;
    return a;
}

// The keep bit of element (b, t, c) as dropout.h documents it, written out on its own.
bool ref_keep(const kernels::DropoutArgs& a, int b, int t, int c) {
    const kernels::DropoutKey& k = a.key;
    const uint64_t e = ((k.batch0 + b) * static_cast<uint64_t>(k.tokens) + k.token0 + t) * a.C + c;
    const uint32_t stream = k.micro << 16 | k.layer << 4 | static_cast<uint32_t>(k.tag);
    const uint32_t word = core::philox_draw(k.seed, e / 4, k.step, stream).v[e % 4];
    return static_cast<double>(word) >= std::nearbyint(static_cast<double>(a.p) * 4294967296.0);
}

std::vector<float> run_cpu(const kernels::DropoutArgs& a, const std::vector<float>& x) {
    std::vector<float> out(x.size(), NAN);
    kernels::dropout_forward(kernels::cpu_exec(), out.data(), x.data(), a);
    return out;
}

} // namespace

SOF_OP_CPU("dropout", "equals x * keep / (1 - p) with the documented Philox keep bits") {
    for (const Shape& s : kShapes) {
        for (float p : {0.1f, 0.5f}) {
            const std::string tag = "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
                                    " C=" + std::to_string(s.C) + " p=" + std::to_string(p);
            INFO(tag);
            const kernels::DropoutArgs a = make_args(s, p, 1);
            const auto x = randn(static_cast<size_t>(s.B) * s.T * s.C, 11);
            std::vector<double> ref(x.size());
            size_t i = 0;
            for (int b = 0; b < s.B; b++)
                for (int t = 0; t < s.T; t++)
                    for (int c = 0; c < s.C; c++, i++)
                        ref[i] = ref_keep(a, b, t, c) ? x[i] / (1.0 - p) : 0.0;
            const auto out = run_cpu(a, x);
            // one rounding of x times the fp32 scale: 2 ulp
            check_ref("dropout " + tag, out, ref, 2.5e-7);
            size_t pattern = 0;
            for (size_t j = 0; j < x.size(); j++)
                pattern += (out[j] == 0.0f) != (ref[j] == 0.0);
            CHECK(pattern == 0);
            // backward: the same mask on the gradient
            std::vector<float> dx(x.size());
            kernels::dropout_backward(kernels::cpu_exec(), dx.data(), x.data(), a);
            check_bitwise("dropout_backward " + tag, dx, out);
            // in place
            std::vector<float> y = x;
            kernels::dropout_forward(kernels::cpu_exec(), y.data(), y.data(), a);
            check_bitwise("dropout in place " + tag, y, out);
        }
    }
}

// Keep rate 1 - p and the mean of the output 1 (for ones in), within 5 binomial sigmas, overall,
// per word of a draw (e % 4) and per batch row; masks of different steps, layers, tags, micro-steps
// and seeds agree as independent ones would (rate p^2 + (1-p)^2).
SOF_OP_CPU("dropout", "keep rate and scale within binomial sigmas, independent streams") {
    const Shape s{4, 512, 515};
    const double n = static_cast<double>(s.B) * s.T * s.C;
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    for (float p : {0.1f, 0.5f, 0.9f}) {
        INFO("p=" << p);
        const kernels::DropoutArgs a = make_args(s, p, 2);
        const auto out = run_cpu(a, ones);
        const float scale = static_cast<float>(1.0 / (1.0 - p));
        double kept = 0, sum = 0, word_kept[4] = {0, 0, 0, 0}, row_kept[4] = {0, 0, 0, 0};
        size_t bad = 0, i = 0;
        for (int b = 0; b < s.B; b++)
            for (int t = 0; t < s.T; t++)
                for (int c = 0; c < s.C; c++, i++) {
                    const bool k = out[i] != 0.0f;
                    bad += k && out[i] != scale;
                    kept += k;
                    sum += out[i];
                    const uint64_t e = ((a.key.batch0 + b) * static_cast<uint64_t>(a.key.tokens) +
                                        a.key.token0 + t) *
                                           s.C +
                                       c;
                    word_kept[e % 4] += k;
                    row_kept[b] += k;
                }
        CHECK(bad == 0); // every kept value is exactly 1 / (1 - p) in fp32
        const double q = 1.0 - p, sigma = std::sqrt(n * p * q);
        CHECK(std::fabs(kept - n * q) < 5 * sigma);
        // mean of the output: 1 within 5 sigma (kept / n * scale)
        CHECK(std::fabs(sum / n - 1.0) < 5 * std::sqrt(p / q / n));
        for (int w = 0; w < 4; w++)
            CHECK(std::fabs(word_kept[w] - n / 4 * q) < 5 * std::sqrt(n / 4 * p * q));
        for (int b = 0; b < s.B; b++)
            CHECK(std::fabs(row_kept[b] - n / s.B * q) < 5 * std::sqrt(n / s.B * p * q));
        // every field of the key makes another stream
        for (int field = 0; field < 5; field++) {
            INFO("field " << field);
            kernels::DropoutArgs o = a;
            if (field == 0) o.key.seed ^= 1;
            if (field == 1) o.key.step += 1;
            if (field == 2) o.key.layer += 1;
            if (field == 3) o.key.tag = kernels::DropoutTag::ResidualMlp;
            if (field == 4) o.key.micro += 1;
            const auto other = run_cpu(o, ones);
            double agree = 0;
            for (size_t j = 0; j < other.size(); j++)
                agree += (other[j] != 0.0f) == (out[j] != 0.0f);
            const double r = p * p + q * q;
            CHECK(std::fabs(agree - n * r) < 5 * std::sqrt(n * r * (1 - r)));
        }
    }
}

// A (B, T, C) tensor computed whole, as two halves of batch rows (batch0) and as two halves of
// tokens (token0, as Ulysses ranks): the same bits.
SOF_OP_CPU("dropout", "mask independent of how the work is split") {
    const Shape s{4, 30, 37};
    const auto x = randn(static_cast<size_t>(s.B) * s.T * s.C, 21);
    kernels::DropoutArgs a = make_args(s, 0.3f, 3);
    a.key.token0 = 0;
    a.key.tokens = s.T;
    const auto whole = run_cpu(a, x);
    const size_t TC = static_cast<size_t>(s.T) * s.C;
    std::vector<float> by_rows(whole.size()), by_tokens(whole.size());
    for (int half = 0; half < 2; half++) {
        kernels::DropoutArgs h = a;
        h.B = s.B / 2;
        h.key.batch0 = a.key.batch0 + half * (s.B / 2);
        const std::vector<float> xin(x.begin() + half * (s.B / 2) * TC,
                                     x.begin() + (half + 1) * (s.B / 2) * TC);
        const auto o = run_cpu(h, xin);
        std::copy(o.begin(), o.end(), by_rows.begin() + half * (s.B / 2) * TC);
        kernels::DropoutArgs u = a;
        u.T = s.T / 2;
        u.key.token0 = half * (s.T / 2);
        std::vector<float> xt;
        for (int b = 0; b < s.B; b++)
            xt.insert(xt.end(), x.begin() + b * TC + half * u.T * s.C,
                      x.begin() + b * TC + (half + 1) * u.T * s.C);
        const auto ot = run_cpu(u, xt);
        for (int b = 0; b < s.B; b++)
            std::copy(ot.begin() + static_cast<size_t>(b) * u.T * s.C,
                      ot.begin() + static_cast<size_t>(b + 1) * u.T * s.C,
                      by_tokens.begin() + b * TC + half * u.T * s.C);
    }
    check_bitwise("dropout split by batch rows", by_rows, whole);
    check_bitwise("dropout split by tokens", by_tokens, whole);
}

SOF_OP_CPU("dropout", "p = 0 copies; a bad rate or key is refused by name") {
    const Shape s{2, 3, 5};
    const auto x = randn(30, 31);
    check_bitwise("dropout p=0", run_cpu(make_args(s, 0.0f, 4), x), x);
    auto refused = [&](kernels::DropoutArgs a, const char* what) {
        std::vector<float> out(x.size());
        try {
            kernels::dropout_forward(kernels::cpu_exec(), out.data(), x.data(), a);
            FAIL("no error for " << what);
        } catch (const core::Error& e) {
            CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
        }
    };
    refused(make_args(s, 1.0f, 4), "p = 1 outside [0, 1)");
    refused(make_args(s, -0.1f, 4), "outside [0, 1)");
    kernels::DropoutArgs a = make_args(s, 0.1f, 4);
    a.key.micro = 1u << 16;
    refused(a, "micro-step 65536");
    a = make_args(s, 0.1f, 4);
    a.key.token0 = 10; // 10 + 3 tokens > 3 + 9 global
    refused(a, "outside the global sequence of 12");
    a = make_args(s, 0.1f, 4);
    a.key.batch0 = ~uint64_t{0} - 1;
    refused(a, "overflow 64 bits");
}

namespace {

template <class T> void gpu_cases(Gpu& g) {
    for (const Shape& s : kShapes) {
        const kernels::DropoutArgs a = make_args(s, 0.2f, 5);
        const std::string tag = std::string("dropout ") + dtype_name<T>() +
                                " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
                                " C=" + std::to_string(s.C);
        INFO(tag);
        const auto x = representable<T>(randn(static_cast<size_t>(s.B) * s.T * s.C, 41));
        const auto cpu = run_cpu(a, x);
        auto dx = g.upload<T>(x), dout = g.upload<T>(std::vector<float>(x.size(), NAN));
        kernels::dropout_forward<T>(g.exec(), dout.get(), dx.get(), a);
        const auto got = g.download(dout);
        size_t pattern = 0;
        for (size_t j = 0; j < x.size(); j++)
            pattern += (got[j] == 0.0f) != (cpu[j] == 0.0f);
        CHECK(pattern == 0); // the same keep bits
        if constexpr (std::is_same_v<T, float>)
            check_bitwise(tag, got, cpu); // the same fp32 product
        else
            check_twin(tag, got, cpu, 1e-2);                           // rounded to bf16 on store
        kernels::dropout_backward<T>(g.exec(), dx.get(), dx.get(), a); // in place
        check_bitwise(tag + " backward in place", g.download(dx), got);
    }
}

} // namespace

SOF_OP_GPU("dropout", "the CPU twin's keep bits; fp32 bitwise, bf16 within its rounding") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    gpu_cases<float>(*g);
    gpu_cases<core::bf16>(*g);
}
