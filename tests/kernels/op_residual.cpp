// Op driver cases of residual.h: out = a + b (out may alias a) and dst += src; CPU twin vs double,
// CUDA twin (fp32 and bf16) vs the CPU twin.
#include <type_traits>

#include "harness.h"
#include "kernels/residual.h"

using namespace sof;
using namespace sof::ktest;

namespace {
const long kSizes[] = {1, 1001, 65536 * 3 + 7}; // a tail of the grid-stride loops
}

SOF_OP_CPU("residual", "out = a + b and dst += src against double") {
    for (long n : kSizes) {
        INFO("n=" << n);
        const auto a = randn(static_cast<size_t>(n), 1), b = randn(static_cast<size_t>(n), 2);
        std::vector<double> ref(static_cast<size_t>(n));
        for (long i = 0; i < n; i++)
            ref[i] = double(a[i]) + b[i];
        std::vector<float> out(static_cast<size_t>(n), NAN);
        kernels::residual_forward(kernels::cpu_exec(), out.data(), a.data(), b.data(), n);
        // one fp32 rounding of an exact double sum
        check_ref("residual_forward n=" + std::to_string(n), out, ref, 1e-6);
        std::vector<float> acc = a; // out aliases a
        kernels::residual_forward(kernels::cpu_exec(), acc.data(), acc.data(), b.data(), n);
        check_bitwise("residual_forward aliased n=" + std::to_string(n), acc, out);
        std::vector<float> dst = a;
        kernels::add_inplace(kernels::cpu_exec(), dst.data(), b.data(), n);
        check_ref("add_inplace n=" + std::to_string(n), dst, ref, 1e-6);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (long n : kSizes) {
        INFO("n=" << n << " " << dtype_name<T>());
        const auto a = representable<T>(randn(static_cast<size_t>(n), 3)),
                   b = representable<T>(randn(static_cast<size_t>(n), 4));
        std::vector<float> cpu(static_cast<size_t>(n));
        kernels::residual_forward(kernels::cpu_exec(), cpu.data(), a.data(), b.data(), n);
        auto da = g.upload<T>(a), db = g.upload<T>(b), dout = g.upload<T>(a);
        kernels::residual_forward<T>(g.exec(), dout.get(), da.get(), db.get(), n);
        const std::string tag =
            std::string("residual n=") + std::to_string(n) + " " + dtype_name<T>();
        const auto fwd = g.download(dout);
        check_twin(tag + " forward", fwd, cpu, tol);
        // fp32: one rounding of the same sum on both twins: the same bits
        if constexpr (std::is_same_v<T, float>) check_bitwise(tag + " forward", fwd, cpu);
        kernels::add_inplace<T>(g.exec(), da.get(), db.get(), n); // da += db
        check_twin(tag + " add_inplace", g.download(da), cpu, tol);
    }
}

} // namespace

SOF_OP_GPU("residual", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: the same single rounding of the same sum (also checked bitwise)
    gpu_cases<float>(*g, 1e-6);
    // bf16: the sum rounded to bf16 (2^-9 relative) vs fp32
    gpu_cases<core::bf16>(*g, 1e-2);
}
