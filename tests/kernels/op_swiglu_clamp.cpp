// Op driver cases of swiglu_clamp.h (GPT-OSS's expert activation): forward and backward against
// double (interleaved and halves), the clamps' gradient at and beyond the bounds as torch's clamp
// gives it (zero at the bounds: moe_reference.py checks it against torch); the CUDA twin.
#include <cmath>
#include <string>

#include "harness.h"
#include "kernels/swiglu_clamp.h"

using namespace sof;
using namespace sof::ktest;
using kernels::ClampedSwiglu;

namespace {

struct Shape {
    const char* name;
    int N, I;
};
const Shape kShapes[] = {{"tiny", 1, 1}, {"odd", 3, 37}, {"gpt-oss-like", 40, 720}};

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

// h and dgu in double; torch's clamp: the gradient passes where min < x < max
void ref(const std::vector<float>& gu, const std::vector<float>& dh, int N, int I,
         const ClampedSwiglu& a, std::vector<double>& h, std::vector<double>& dgu) {
    h.assign(static_cast<size_t>(N) * I, 0.0);
    dgu.assign(static_cast<size_t>(N) * 2 * I, 0.0);
    const double L = a.limit, al = a.alpha;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < I; i++) {
            const size_t row = static_cast<size_t>(n) * 2 * I;
            const size_t gi = row + (a.interleaved ? 2 * i : i);
            const size_t ui = row + (a.interleaved ? 2 * i + 1 : I + i);
            const double g = gu[gi], u = gu[ui], d = dh[static_cast<size_t>(n) * I + i];
            const double gc = std::min(g, L), uc = std::max(-L, std::min(u, L));
            const double s = sigmoid(al * gc);
            h[static_cast<size_t>(n) * I + i] = (uc + 1.0) * gc * s;
            dgu[gi] = g < L ? d * (uc + 1.0) * (s + gc * al * s * (1.0 - s)) : 0.0;
            dgu[ui] = (u > -L && u < L) ? d * gc * s : 0.0;
        }
}

} // namespace

SOF_OP_CPU("swiglu_clamp", "forward and backward against double, interleaved and halves") {
    for (const bool inter : {true, false}) {
        ClampedSwiglu a;
        a.interleaved = inter;
        {
            // the reference backward vs central differences (values away from the kinks)
            const int N = 2, I = 5;
            auto gu = randn(static_cast<size_t>(N) * 2 * I, 7, 2.0f);
            gu[0] = 9.0f; // gate above the limit (interleaved: gate 0; halves: gate 0)
            gu[3] = -8.5f;
            const auto dh = randn(static_cast<size_t>(N) * I, 8);
            std::vector<double> h, dgu;
            ref(gu, dh, N, I, a, h, dgu);
            auto loss = [&](const std::vector<double>& x) { // sum(dh * h(x)) in double
                double l = 0.0;
                for (int n = 0; n < N; n++)
                    for (int i = 0; i < I; i++) {
                        const size_t row = static_cast<size_t>(n) * 2 * I;
                        const double g = x[row + (inter ? 2 * i : i)];
                        const double u = x[row + (inter ? 2 * i + 1 : I + i)];
                        const double gc = std::min(g, 7.0), uc = std::max(-7.0, std::min(u, 7.0));
                        l += dh[static_cast<size_t>(n) * I + i] * (uc + 1.0) * gc *
                             sigmoid(1.702 * gc);
                    }
                return l;
            };
            check_close("swiglu_clamp reference backward vs finite differences", dgu,
                        numeric_grad(loss, to_double(gu), 1e-6), 1e-7);
        }
        for (const Shape& s : kShapes) {
            INFO("shape " << s.name << " interleaved " << inter);
            // scale 5: many values beyond the +-7 bounds
            const auto gu = randn(static_cast<size_t>(s.N) * 2 * s.I, 1, 5.0f);
            const auto dh = randn(static_cast<size_t>(s.N) * s.I, 2);
            std::vector<double> h, dgu;
            ref(gu, dh, s.N, s.I, a, h, dgu);
            std::vector<float> hh(h.size(), NAN), dd(dgu.size(), NAN);
            kernels::swiglu_clamp_forward(kernels::cpu_exec(), hh.data(), gu.data(), s.N, s.I, a);
            kernels::swiglu_clamp_backward(kernels::cpu_exec(), dd.data(), dh.data(), gu.data(),
                                           s.N, s.I, a);
            const std::string t = std::string("swiglu_clamp ") + s.name + (inter ? " inter" : "");
            // fp32 exp and a few products: a few ulps of the largest value
            check_ref(t + " forward", hh, h, 1e-6);
            check_ref(t + " backward", dd, dgu, 1e-6);
            if (s.I > 1) { // the other column layout must fail
                ClampedSwiglu other = a;
                other.interleaved = !inter;
                std::vector<double> h2, d2;
                ref(gu, dh, s.N, s.I, other, h2, d2);
                CHECK(normalized_error(hh, h2) > 1e-2);
            }
        }
    }
}

SOF_OP_CPU("swiglu_clamp", "the clamps' gradient at and beyond the bounds (torch's clamp)") {
    // gate: 7 (at the bound: cut, as torch 2.15's clamp), 7.5 (cut), -20 (passes: no lower
    // bound); up: 7, -7 (at the bounds: cut), 7.5, -7.5 (cut), 0 (passes)
    const std::vector<float> gu = {7.0f, 7.0f, 7.5f, -7.0f, -20.0f, 7.5f, 1.0f, -7.5f, NAN, 0.0f};
    const std::vector<float> dh(5, 1.0f);
    std::vector<float> h(5), d(10);
    const ClampedSwiglu a; // interleaved, limit 7, alpha 1.702
    kernels::swiglu_clamp_forward(kernels::cpu_exec(), h.data(), gu.data(), 1, 5, a);
    kernels::swiglu_clamp_backward(kernels::cpu_exec(), d.data(), dh.data(), gu.data(), 1, 5, a);
    CHECK(d[0] == 0.0f);     // gate == 7
    CHECK(d[1] == 0.0f);     // up == 7
    CHECK(d[2] == 0.0f);     // gate 7.5 > 7
    CHECK(d[3] == 0.0f);     // up == -7
    CHECK(d[4] != 0.0f);     // gate -20: no lower bound (d = tiny but the path is open)
    CHECK(d[5] == 0.0f);     // up 7.5
    CHECK(d[7] == 0.0f);     // up -7.5
    CHECK(d[8] == 0.0f);     // gate NaN: torch's comparisons are false
    CHECK(std::isnan(d[9])); // up 0: open, times a NaN gate (as torch)
    CHECK(d[6] != 0.0f);     // gate 1 with up -7.5: open (the up's clamp does not close the gate's)
    CHECK(std::isnan(h[4]));
    // h at the clamps: gate 7.5 acts as 7, up 7.5 as 7, up -7.5 as -7
    CHECK(h[1] == doctest::Approx((-7.0 + 1.0) * 7.0 / (1.0 + std::exp(-1.702 * 7.0))));
    CHECK(h[2] == doctest::Approx((7.0 + 1.0) * -20.0 / (1.0 + std::exp(1.702 * 20.0))));
    CHECK(h[3] == doctest::Approx((-7.0 + 1.0) * 1.0 / (1.0 + std::exp(-1.702))));
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (const bool inter : {true, false}) {
        ClampedSwiglu a;
        a.interleaved = inter;
        for (const Shape& s : kShapes) {
            INFO("shape " << s.name << " " << dtype_name<T>() << " interleaved " << inter);
            const auto gu = representable<T>(randn(static_cast<size_t>(s.N) * 2 * s.I, 3, 5.0f));
            const auto dh = representable<T>(randn(static_cast<size_t>(s.N) * s.I, 4));
            std::vector<float> h(dh.size()), dgu(gu.size());
            kernels::swiglu_clamp_forward(kernels::cpu_exec(), h.data(), gu.data(), s.N, s.I, a);
            kernels::swiglu_clamp_backward(kernels::cpu_exec(), dgu.data(), dh.data(), gu.data(),
                                           s.N, s.I, a);
            auto din = g.upload<T>(gu), ddh = g.upload<T>(dh);
            auto dho = g.upload<T>(std::vector<float>(h.size(), NAN));
            auto ddg = g.upload<T>(std::vector<float>(gu.size(), NAN));
            kernels::swiglu_clamp_forward<T>(g.exec(), dho.get(), din.get(), s.N, s.I, a);
            kernels::swiglu_clamp_backward<T>(g.exec(), ddg.get(), ddh.get(), din.get(), s.N, s.I,
                                              a);
            const std::string t = std::string("swiglu_clamp ") + s.name + " " + dtype_name<T>();
            check_twin(t + " forward", g.download(dho), h, tol);
            check_twin(t + " backward", g.download(ddg), dgu, tol);
        }
    }
}

} // namespace

SOF_OP_GPU("swiglu_clamp", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: CUDA expf (2 ulp) and FMA contraction (swiglu's threshold)
    gpu_cases<float>(*g, 5e-6);
    // bf16: one rounding of each result
    gpu_cases<core::bf16>(*g, 1e-2);
}
