// Op driver cases of embedding.h: token (+ position) gathers and the backward into fp32 tables
// with repeated ids; CPU twin vs double and vs in-order fp32 sums (bitwise), CUDA twin vs the CPU
// twin (the backward bitwise: the same additions in the same order, no atomics).
#include "harness.h"
#include "kernels/embedding.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, C, V, T; // positions n % T (N/T sequences)
    bool wpe;
};
const Shape kShapes[] = {
    {"tiny", 1, 1, 1, 1, true},
    {"odd", 5, 3, 4, 5, true},
    {"many repeats", 64, 37, 7, 16, true},
    {"no wpe (rope models)", 50, 33, 9, 50, false},
    {"realistic", 256, 768, 1000, 128, true},
};

struct Data {
    std::vector<int> tok, pos;
    std::vector<float> wte, wpe, dout, dwte0, dwpe0;
};

Data make_data(const Shape& s, uint32_t seed) {
    Data d;
    d.tok = randint(s.N, seed, 0, s.V - 1);
    for (int n = 0; n < s.N; n++)
        d.pos.push_back(n % s.T);
    d.wte = randn(size_t(s.V) * s.C, seed + 1);
    d.wpe = randn(size_t(s.T) * s.C, seed + 2);
    d.dout = randn(size_t(s.N) * s.C, seed + 3);
    d.dwte0 = randn(d.wte.size(), seed + 4);
    d.dwpe0 = randn(d.wpe.size(), seed + 5);
    return d;
}

struct Out {
    std::vector<float> out, dwte, dwpe;
};

Out run_cpu(const Data& d, const Shape& s) {
    Out o{std::vector<float>(size_t(s.N) * s.C, NAN), d.dwte0, d.dwpe0};
    kernels::embedding_forward(kernels::cpu_exec(), o.out.data(), d.tok.data(), d.pos.data(),
                               d.wte.data(), s.wpe ? d.wpe.data() : nullptr, s.N, s.C);
    kernels::embedding_backward(kernels::cpu_exec(), o.dwte.data(), s.wpe ? o.dwpe.data() : nullptr,
                                d.dout.data(), d.tok.data(), d.pos.data(), d.tok.data(),
                                d.pos.data(), s.N, s.C);
    return o;
}

} // namespace

SOF_OP_CPU("embedding", "gathers and deterministic table grads against double") {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name);
        const Data d = make_data(s, 1);
        const Out o = run_cpu(d, s);
        std::vector<double> out(o.out.size()), dwte = to_double(d.dwte0), dwpe = to_double(d.dwpe0);
        std::vector<float> seq_wte = d.dwte0, seq_wpe = d.dwpe0; // in-order fp32 sums
        for (int n = 0; n < s.N; n++)
            for (int c = 0; c < s.C; c++) {
                const size_t t = size_t(d.tok[n]) * s.C + c, p = size_t(d.pos[n]) * s.C + c;
                const float g = d.dout[size_t(n) * s.C + c];
                out[size_t(n) * s.C + c] = double(d.wte[t]) + (s.wpe ? d.wpe[p] : 0.0);
                dwte[t] += g;
                seq_wte[t] += g;
                dwpe[p] += g;
                seq_wpe[p] += g;
            }
        const std::string tag = std::string("embedding ") + s.name;
        // one fp32 add forward; fp32 running sums of up to ~20 repeats backward
        check_ref(tag + " out", o.out, out, 1e-6);
        check_ref(tag + " dwte", o.dwte, dwte, 1e-5);
        check_bitwise(tag + " dwte vs in-order fp32 sums", o.dwte, seq_wte);
        if (s.wpe) {
            check_ref(tag + " dwpe", o.dwpe, dwpe, 1e-5);
            check_bitwise(tag + " dwpe vs in-order fp32 sums", o.dwpe, seq_wpe);
        } else {
            check_bitwise(tag + " dwpe untouched without wpe", o.dwpe, d.dwpe0);
        }
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({"large, one hot token", 8192, 1024, 8192, 1024, true});
    for (const Shape& s : shapes) {
        INFO("shape " << s.name << " " << dtype_name<T>());
        Data d = make_data(s, 2);
        if (s.N == 8192)
            for (int n = 0; n < s.N; n += 3)
                d.tok[n] = 42; // one row with thousands of positions
        d.wte = representable<T>(d.wte);
        d.wpe = representable<T>(d.wpe);
        d.dout = representable<T>(d.dout);
        const Out c = run_cpu(d, s);
        auto tok = g.upload_ids(d.tok), pos = g.upload_ids(d.pos);
        auto wte = g.upload<T>(d.wte), wpe = g.upload<T>(d.wpe), dout = g.upload<T>(d.dout);
        auto out = g.upload<T>(std::vector<float>(c.out.size(), NAN));
        auto dwte = g.upload<float>(d.dwte0), dwpe = g.upload<float>(d.dwpe0);
        kernels::embedding_forward<T>(g.exec(), out.get(), tok.get(), pos.get(), wte.get(),
                                      s.wpe ? wpe.get() : nullptr, s.N, s.C);
        kernels::embedding_backward<T>(g.exec(), dwte.get(), s.wpe ? dwpe.get() : nullptr,
                                       dout.get(), tok.get(), pos.get(), d.tok.data(), d.pos.data(),
                                       s.N, s.C);
        const std::string tag = std::string("embedding ") + s.name + " " + dtype_name<T>();
        check_twin(tag + " out", g.download(out), c.out, tol);
        // the same fp32 values (bf16 dout widened exactly) added in the same order
        check_bitwise(tag + " dwte", g.download(dwte), c.dwte);
        check_bitwise(tag + " dwpe", g.download(dwpe), c.dwpe);
    }
}

} // namespace

SOF_OP_GPU("embedding", "fp32 and bf16 against the CPU twin (backward bitwise)") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: one add, the same rounding (the grads are checked bitwise)
    gpu_cases<float>(*g, 1e-6);
    // bf16: the sum rounded to bf16 (2^-9 relative)
    gpu_cases<core::bf16>(*g, 1e-2);
}
