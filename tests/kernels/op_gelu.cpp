// Op driver cases of gelu.h: tanh-form GELU forward and backward (dinp may alias dout); CPU twin
// vs double (whose derivative is checked by finite differences), CUDA twin vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/gelu.h"

using namespace sof;
using namespace sof::ktest;

namespace {

const long kSizes[] = {1, 1003, 65536 * 2 + 5};

double gelu_ref(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {
    const double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
    const double th = std::tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

} // namespace

SOF_OP_CPU("gelu", "forward and backward against double") {
    // the reference derivative against finite differences of the reference forward
    {
        const auto x = to_double(randn(64, 9, 3.0f));
        std::vector<double> an(x.size()), fd(x.size());
        for (size_t i = 0; i < x.size(); i++) {
            an[i] = gelu_grad_ref(x[i]);
            fd[i] = (gelu_ref(x[i] + 1e-6) - gelu_ref(x[i] - 1e-6)) / 2e-6;
        }
        check_close("gelu reference derivative vs finite differences", an, fd, 1e-7);
    }
    for (long n : kSizes) {
        INFO("n=" << n);
        const auto x = randn(static_cast<size_t>(n), 1, 3.0f),
                   dout = randn(static_cast<size_t>(n), 2);
        std::vector<double> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
        for (long i = 0; i < n; i++) {
            y[i] = gelu_ref(x[i]);
            dx[i] = gelu_grad_ref(x[i]) * dout[i];
        }
        std::vector<float> out(static_cast<size_t>(n), NAN), din(static_cast<size_t>(n), NAN);
        kernels::gelu_forward(kernels::cpu_exec(), out.data(), x.data(), n);
        kernels::gelu_backward(kernels::cpu_exec(), din.data(), x.data(), dout.data(), n);
        const std::string tag = "gelu n=" + std::to_string(n);
        // fp32 tanh and a few products: a few ulps of the largest value
        check_ref(tag + " forward", out, y, 1e-6);
        check_ref(tag + " backward", din, dx, 1e-6);
        std::vector<float> alias = dout; // dinp aliases dout
        kernels::gelu_backward(kernels::cpu_exec(), alias.data(), x.data(), alias.data(), n);
        check_bitwise(tag + " backward aliased", alias, din);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (long n : kSizes) {
        INFO("n=" << n << " " << dtype_name<T>());
        const auto x = representable<T>(randn(static_cast<size_t>(n), 3, 3.0f));
        const auto dout = representable<T>(randn(static_cast<size_t>(n), 4));
        std::vector<float> out(static_cast<size_t>(n)), din(static_cast<size_t>(n));
        kernels::gelu_forward(kernels::cpu_exec(), out.data(), x.data(), n);
        kernels::gelu_backward(kernels::cpu_exec(), din.data(), x.data(), dout.data(), n);
        auto dx = g.upload<T>(x), ddout = g.upload<T>(dout), dy = g.upload<T>(x);
        kernels::gelu_forward<T>(g.exec(), dy.get(), dx.get(), n);
        kernels::gelu_backward<T>(g.exec(), ddout.get(), dx.get(), ddout.get(), n); // aliased
        const std::string tag = "gelu n=" + std::to_string(n) + " " + dtype_name<T>();
        check_twin(tag + " forward", g.download(dy), out, tol);
        check_twin(tag + " backward (aliased)", g.download(ddout), din, tol);
    }
}

} // namespace

SOF_OP_GPU("gelu", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: CUDA tanhf (2 ulp) vs glibc tanhf; in the backward 1 - tanh^2 cancels for |x| > 3
    // and x (1 + 0.13 x^2) amplifies that ulp: up to ~1e-6 of the largest value (the CPU twin
    // is 3.4e-7 from double)
    gpu_cases<float>(*g, 5e-6);
    // bf16: one rounding of the result (2^-9 relative)
    gpu_cases<core::bf16>(*g, 1e-2);
}
