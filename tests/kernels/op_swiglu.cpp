// Op driver cases of swiglu.h: h = silu(gate) * up over [gate | up] rows and its backward; CPU
// twin vs double (derivative checked by finite differences), CUDA twin vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/swiglu.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, I;
};
const Shape kShapes[] = {{"tiny", 1, 1}, {"odd", 3, 37}, {"realistic", 64, 2816}};

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

// h and dgu in double
void ref(const std::vector<float>& gu, const std::vector<float>& dh, int N, int I,
         std::vector<double>& h, std::vector<double>& dgu) {
    h.assign(size_t(N) * I, 0.0);
    dgu.assign(size_t(N) * 2 * I, 0.0);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < I; i++) {
            const double g = gu[static_cast<size_t>(n) * 2 * I + i],
                         u = gu[static_cast<size_t>(n) * 2 * I + I + i];
            const double d = dh[static_cast<size_t>(n) * I + i], s = 1.0 / (1.0 + std::exp(-g));
            h[static_cast<size_t>(n) * I + i] = silu(g) * u;
            dgu[static_cast<size_t>(n) * 2 * I + i] = d * u * (s + g * s * (1.0 - s));
            dgu[static_cast<size_t>(n) * 2 * I + I + i] = d * silu(g);
        }
}

} // namespace

SOF_OP_CPU("swiglu", "forward and backward against double") {
    {
        // reference backward vs finite differences of sum(dh * h(gu))
        const int N = 2, I = 5;
        const auto gu = randn(size_t(N) * 2 * I, 7, 2.0f), dh = randn(size_t(N) * I, 8);
        std::vector<double> h, dgu;
        ref(gu, dh, N, I, h, dgu);
        auto loss = [&](const std::vector<double>& x) {
            double l = 0.0;
            for (int n = 0; n < N; n++)
                for (int i = 0; i < I; i++)
                    l += dh[static_cast<size_t>(n) * I + i] *
                         silu(x[static_cast<size_t>(n) * 2 * I + i]) *
                         x[static_cast<size_t>(n) * 2 * I + I + i];
            return l;
        };
        check_close("swiglu reference backward vs finite differences", dgu,
                    numeric_grad(loss, to_double(gu), 1e-6), 1e-7);
    }
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name);
        const auto gu = randn(size_t(s.N) * 2 * s.I, 1, 2.0f), dh = randn(size_t(s.N) * s.I, 2);
        std::vector<double> h, dgu;
        ref(gu, dh, s.N, s.I, h, dgu);
        std::vector<float> hh(h.size(), NAN), dd(dgu.size(), NAN);
        kernels::swiglu_forward(kernels::cpu_exec(), hh.data(), gu.data(), s.N, s.I);
        kernels::swiglu_backward(kernels::cpu_exec(), dd.data(), dh.data(), gu.data(), s.N, s.I);
        // fp32 exp and a few products: a few ulps of the largest value
        check_ref(std::string("swiglu ") + s.name + " forward", hh, h, 1e-6);
        check_ref(std::string("swiglu ") + s.name + " backward", dd, dgu, 1e-6);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " " << dtype_name<T>());
        const auto gu = representable<T>(randn(size_t(s.N) * 2 * s.I, 3, 2.0f));
        const auto dh = representable<T>(randn(size_t(s.N) * s.I, 4));
        std::vector<float> h(dh.size()), dgu(gu.size());
        kernels::swiglu_forward(kernels::cpu_exec(), h.data(), gu.data(), s.N, s.I);
        kernels::swiglu_backward(kernels::cpu_exec(), dgu.data(), dh.data(), gu.data(), s.N, s.I);
        auto dgu_in = g.upload<T>(gu), ddh = g.upload<T>(dh);
        auto dhout = g.upload<T>(std::vector<float>(h.size(), NAN));
        auto ddgu = g.upload<T>(std::vector<float>(gu.size(), NAN));
        kernels::swiglu_forward<T>(g.exec(), dhout.get(), dgu_in.get(), s.N, s.I);
        kernels::swiglu_backward<T>(g.exec(), ddgu.get(), ddh.get(), dgu_in.get(), s.N, s.I);
        const std::string tag = std::string("swiglu ") + s.name + " " + dtype_name<T>();
        check_twin(tag + " forward", g.download(dhout), h, tol);
        check_twin(tag + " backward", g.download(ddgu), dgu, tol);
    }
}

} // namespace

SOF_OP_GPU("swiglu", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: CUDA expf (2 ulp) and FMA contraction vs glibc expf and separate products: a few
    // ulps of the largest value (the CPU twin is 1.3e-7 from double)
    gpu_cases<float>(*g, 5e-6);
    // bf16: one rounding of each result (2^-9 relative)
    gpu_cases<core::bf16>(*g, 1e-2);
}
