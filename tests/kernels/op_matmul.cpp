// Op driver cases of matmul.h: out = inp @ w^T (+ bias) (+ GELU with pre_gelu), dinp and the
// accumulated dw; CPU twin vs double loops, CUDA twin (cuBLASLt, fp32 and bf16) vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/matmul.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, C, OC;
    bool bias, gelu;
};

// Every sgemm tile edge of the CPU twin (64 x 256 output tiles) and every epilogue of the CUDA
// twin (OC % 8 != 0: GELU falls back to the pointwise kernel).
const Shape kShapes[] = {
    {"tiny", 1, 1, 1, true, false},
    {"tiny gelu", 2, 3, 5, true, true},
    {"tile tails", 70, 300, 130, true, true},
    {"tile tails, no bias", 70, 300, 130, false, false},
    {"no bias, gelu", 33, 64, 72, false, true},
    {"realistic qkv", 32, 768, 2304, true, false},
    {"realistic fc + gelu", 32, 768, 3072, true, true},
};

double gelu_ref(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct Data {
    std::vector<float> inp, w, bias, dout, dw0;
};

Data make_data(const Shape& s, uint32_t seed) {
    Data d;
    d.inp = randn(static_cast<size_t>(s.N) * s.C, seed);
    d.w = randn(static_cast<size_t>(s.OC) * s.C, seed + 1, 1.0f / std::sqrt(float(s.C)));
    d.bias = randn(s.OC, seed + 2);
    d.dout = randn(static_cast<size_t>(s.N) * s.OC, seed + 3);
    d.dw0 = randn(static_cast<size_t>(s.OC) * s.C, seed + 4);
    return d;
}

struct Result {
    std::vector<float> out, pre, dinp, dw;
};

Result run_cpu(const Shape& s, const Data& d, bool with_dinp) {
    Result r;
    const size_t no = static_cast<size_t>(s.N) * s.OC;
    r.out.assign(no, NAN);
    r.pre.assign(s.gelu ? no : 0, NAN);
    kernels::matmul_forward(kernels::cpu_exec(), r.out.data(), s.gelu ? r.pre.data() : nullptr,
                            d.inp.data(), d.w.data(), s.bias ? d.bias.data() : nullptr, s.N, s.C,
                            s.OC);
    r.dinp.assign(with_dinp ? static_cast<size_t>(s.N) * s.C : 0, NAN); // overwritten
    r.dw = d.dw0;
    kernels::matmul_backward(kernels::cpu_exec(), with_dinp ? r.dinp.data() : nullptr, r.dw.data(),
                             d.dout.data(), d.inp.data(), d.w.data(), s.N, s.C, s.OC);
    return r;
}

} // namespace

SOF_OP_CPU("matmul", "forward (+bias, +GELU) and backward against double loops") {
    kernels::cpu::use_single_threaded_blas();
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " N=" << s.N << " C=" << s.C << " OC=" << s.OC);
        const Data d = make_data(s, 11);
        const Result r = run_cpu(s, d, true);
        std::vector<double> pre(r.out.size()), out(r.out.size());
        std::vector<double> dinp(r.dinp.size()), dw = to_double(d.dw0);
        for (int n = 0; n < s.N; n++)
            for (int o = 0; o < s.OC; o++) {
                double a = s.bias ? d.bias[o] : 0.0;
                for (int c = 0; c < s.C; c++)
                    a += double(d.inp[static_cast<size_t>(n) * s.C + c]) * d.w[size_t(o) * s.C + c];
                pre[static_cast<size_t>(n) * s.OC + o] = a;
                out[static_cast<size_t>(n) * s.OC + o] = s.gelu ? gelu_ref(a) : a;
            }
        for (int n = 0; n < s.N; n++)
            for (int c = 0; c < s.C; c++) {
                double a = 0.0;
                for (int o = 0; o < s.OC; o++)
                    a += double(d.dout[static_cast<size_t>(n) * s.OC + o]) *
                         d.w[size_t(o) * s.C + c];
                dinp[static_cast<size_t>(n) * s.C + c] = a;
            }
        for (int o = 0; o < s.OC; o++)
            for (int c = 0; c < s.C; c++) {
                double a = 0.0;
                for (int n = 0; n < s.N; n++)
                    a += double(d.dout[static_cast<size_t>(n) * s.OC + o]) *
                         d.inp[static_cast<size_t>(n) * s.C + c];
                dw[size_t(o) * s.C + c] += a;
            }
        // fp32 dot products of up to 3072 terms against double: ~1e-7 of the largest output
        const double tol = 1e-5;
        const std::string tag = std::string("matmul ") + s.name;
        check_ref(tag + " out", r.out, out, tol);
        if (s.gelu) check_ref(tag + " pre_gelu", r.pre, pre, tol);
        check_ref(tag + " dinp", r.dinp, dinp, tol);
        check_ref(tag + " dw (accumulated)", r.dw, dw, tol);
        // dinp = null: only dw, the same as with dinp
        const Result r2 = run_cpu(s, d, false);
        check_bitwise(tag + " dw without dinp", r2.dw, r.dw);
    }
}

namespace {

// The CUDA twin on inputs representable in T; offset = 1 shifts every pointer by one element
// (2- or 4-byte aligned: the plans are keyed by alignment).
template <class T> Result run_gpu(Gpu& g, const Shape& s, const Data& d, int offset) {
    auto up = [&](const std::vector<float>& v) {
        std::vector<float> p(offset, 0.0f);
        p.insert(p.end(), v.begin(), v.end());
        return g.upload<T>(p);
    };
    const size_t no = static_cast<size_t>(s.N) * s.OC;
    auto inp = up(d.inp), w = up(d.w), bias = up(d.bias), dout = up(d.dout);
    auto out = up(std::vector<float>(no, NAN)), pre = up(std::vector<float>(no, NAN));
    auto dinp = up(std::vector<float>(static_cast<size_t>(s.N) * s.C, NAN));
    std::vector<float> dw0(offset, 0.0f);
    dw0.insert(dw0.end(), d.dw0.begin(), d.dw0.end());
    auto dw = g.upload<float>(dw0);
    const kernels::Exec ex = g.exec();
    kernels::matmul_forward<T>(ex, out.get() + offset, s.gelu ? pre.get() + offset : nullptr,
                               inp.get() + offset, w.get() + offset,
                               s.bias ? bias.get() + offset : nullptr, s.N, s.C, s.OC);
    kernels::matmul_backward<T>(ex, dinp.get() + offset, dw.get() + offset, dout.get() + offset,
                                inp.get() + offset, w.get() + offset, s.N, s.C, s.OC);
    Result r;
    r.out = g.download(out.get() + offset, no);
    if (s.gelu) r.pre = g.download(pre.get() + offset, no);
    r.dinp = g.download(dinp.get() + offset, static_cast<size_t>(s.N) * s.C);
    r.dw = g.download(dw.get() + offset, d.dw0.size());
    return r;
}

template <class T> void gpu_cases(Gpu& g, double tol) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({"large fc + gelu", 512, 768, 3072, true, true});
    for (const Shape& s : shapes) {
        for (int offset : {0, 1}) {
            INFO("shape " << s.name << " N=" << s.N << " C=" << s.C << " OC=" << s.OC << " "
                          << dtype_name<T>() << " pointer offset " << offset);
            Data d = make_data(s, 21);
            d.inp = representable<T>(d.inp);
            d.w = representable<T>(d.w);
            d.bias = representable<T>(d.bias);
            d.dout = representable<T>(d.dout);
            const Result c = run_cpu(s, d, true);
            const Result a = run_gpu<T>(g, s, d, offset);
            const std::string tag =
                std::string("matmul ") + s.name + " " + dtype_name<T>() + (offset ? " offset" : "");
            check_twin(tag + " out", a.out, c.out, tol);
            if (s.gelu) check_twin(tag + " pre_gelu", a.pre, c.pre, tol);
            check_twin(tag + " dinp", a.dinp, c.dinp, tol);
            check_twin(tag + " dw", a.dw, c.dw, tol);
            // the same plan again: the same bits (STV needs reproducible runs)
            const Result b = run_gpu<T>(g, s, d, offset);
            check_bitwise(tag + " out, second run", b.out, a.out);
            check_bitwise(tag + " dw, second run", b.dw, a.dw);
        }
    }
}

} // namespace

SOF_OP_GPU("matmul", "cuBLASLt in fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: CUBLAS_COMPUTE_32F vs OpenBLAS, both fp32 FMAs in another order: ~1e-6 of the max.
    gpu_cases<float>(*g, 1e-5);
    // bf16: each output element rounded to bf16 once (2^-9 relative) over fp32 accumulation of
    // the same bf16 inputs; 1e-2 of the max leaves a 2.5x margin.
    gpu_cases<core::bf16>(*g, 1e-2);
}
