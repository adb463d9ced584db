// Op driver cases of rmsnorm.h: whole rows and per-head rows at a stride (qk-norm), backward with
// accumulate or overwrite (dx aliasing dout); CPU twin vs double, CUDA twin vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/rmsnorm.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, H, D;
    size_t ld; // >= H*D: per-head rows inside a fused row
};
const Shape kShapes[] = {
    {"tiny", 1, 1, 2, 2},
    {"odd rows", 3, 1, 7, 7},
    {"per-head in fused qkv", 5, 4, 16, (4 + 2 * 2) * 16},
    {"realistic", 33, 1, 768, 768},
    {"per-head realistic", 17, 8, 128, (8 + 2 * 2) * 128},
};
constexpr float kEps = 1e-6f;

struct Data {
    std::vector<float> x, w, dout, dx0, dw0;
};

Data make_data(const Shape& s, uint32_t seed) {
    const size_t n = size_t(s.N) * s.ld;
    return Data{randn(n, seed, 1.5f), randn(s.D, seed + 1), randn(n, seed + 2), randn(n, seed + 3),
                randn(s.D, seed + 4)};
}

size_t off(const Shape& s, int n, int h) {
    return size_t(n) * s.ld + size_t(h) * s.D;
}

struct Ref {
    std::vector<double> out, rstd, dx, dw;
};

// out and dx keep the values outside the rows (x's and dx0's), as the twins leave them
Ref ref(const Data& d, const Shape& s, bool accumulate) {
    Ref r;
    r.out = to_double(d.dx0); // untouched elements: whatever was there (dx0 is the fill)
    r.rstd.resize(size_t(s.N) * s.H);
    r.dx = to_double(d.dx0);
    r.dw = to_double(d.dw0);
    for (int n = 0; n < s.N; n++)
        for (int h = 0; h < s.H; h++) {
            const size_t o = off(s, n, h);
            double ss = 0.0, sdx = 0.0;
            for (int i = 0; i < s.D; i++)
                ss += double(d.x[o + i]) * d.x[o + i];
            const double rs = 1.0 / std::sqrt(ss / s.D + kEps);
            r.rstd[size_t(n) * s.H + h] = rs;
            for (int i = 0; i < s.D; i++) {
                r.out[o + i] = d.w[i] * (d.x[o + i] * rs);
                r.dw[i] += double(d.dout[o + i]) * d.x[o + i] * rs;
                sdx += double(d.w[i]) * d.dout[o + i] * d.x[o + i];
            }
            for (int i = 0; i < s.D; i++) {
                const double g =
                    double(d.w[i]) * d.dout[o + i] * rs - d.x[o + i] * (sdx / s.D) * rs * rs * rs;
                r.dx[o + i] = accumulate ? r.dx[o + i] + g : g;
            }
        }
    return r;
}

struct Out {
    std::vector<float> out, rstd, dx, dw;
};

// alias: overwrite dout in place (accumulate = false)
Out run_cpu(const Data& d, const Shape& s, bool accumulate, bool alias) {
    Out o;
    o.out = d.dx0;
    o.rstd.assign(size_t(s.N) * s.H, NAN);
    kernels::rmsnorm_forward(kernels::cpu_exec(), o.out.data(), o.rstd.data(), d.x.data(),
                             d.w.data(), s.N, s.H, s.D, s.ld, kEps);
    o.dw = d.dw0;
    std::vector<float> dout = d.dout;
    o.dx = alias ? dout : d.dx0;
    if (alias) {
        // outside the rows dx is dout's content
        kernels::rmsnorm_backward(kernels::cpu_exec(), o.dx.data(), false, o.dw.data(), o.dx.data(),
                                  d.x.data(), d.w.data(), o.rstd.data(), s.N, s.H, s.D, s.ld);
    } else {
        kernels::rmsnorm_backward(kernels::cpu_exec(), o.dx.data(), accumulate, o.dw.data(),
                                  dout.data(), d.x.data(), d.w.data(), o.rstd.data(), s.N, s.H, s.D,
                                  s.ld);
    }
    return o;
}

} // namespace

SOF_OP_CPU("rmsnorm", "rows and strided per-head rows against double") {
    {
        // the reference backward vs finite differences of sum(dout * rmsnorm(x))
        const Shape s{"fd", 2, 2, 5, 12};
        Data d = make_data(s, 30);
        d.dx0.assign(d.dx0.size(), 0.0f);
        const Ref r = ref(d, s, true);
        auto loss = [&](const std::vector<double>& x) {
            double l = 0.0;
            for (int n = 0; n < s.N; n++)
                for (int h = 0; h < s.H; h++) {
                    const size_t o = off(s, n, h);
                    double ss = 0.0;
                    for (int i = 0; i < s.D; i++)
                        ss += x[o + i] * x[o + i];
                    for (int i = 0; i < s.D; i++)
                        l += d.dout[o + i] * d.w[i] * x[o + i] / std::sqrt(ss / s.D + kEps);
                }
            return l;
        };
        check_close("rmsnorm reference dx vs finite differences", r.dx,
                    numeric_grad(loss, to_double(d.x), 1e-6), 1e-7);
    }
    for (const Shape& s : kShapes) {
        for (int mode = 0; mode < 3; mode++) { // accumulate, overwrite, overwrite aliased
            const bool acc = mode == 0, alias = mode == 2;
            INFO("shape " << s.name << " mode " << mode);
            const Data d = make_data(s, 1);
            const Out o = run_cpu(d, s, acc, alias);
            Data dd = d;
            if (alias) dd.dx0 = d.dout; // outside the rows dx keeps dout's values
            Ref r = ref(dd, s, acc);
            r.out = ref(d, s, acc).out;
            const std::string tag = std::string("rmsnorm ") + s.name +
                                    (acc     ? " accumulate"
                                     : alias ? " aliased"
                                             : " overwrite");
            // double row sums, fp32 products: a few ulps of the largest value
            check_ref(tag + " out", o.out, r.out, 1e-6);
            check_ref(tag + " rstd", o.rstd, r.rstd, 1e-6);
            check_ref(tag + " dx", o.dx, r.dx, 1e-5);
            check_ref(tag + " dw (accumulated)", o.dw, r.dw, 1e-5);
        }
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({"large", 2048, 1, 4096, 4096});
    for (const Shape& s : shapes) {
        for (int mode = 0; mode < 3; mode++) {
            const bool acc = mode == 0, alias = mode == 2;
            INFO("shape " << s.name << " mode " << mode << " " << dtype_name<T>());
            Data d = make_data(s, 2);
            for (auto* v : {&d.x, &d.w, &d.dout, &d.dx0})
                *v = representable<T>(*v);
            const Out c = run_cpu(d, s, acc, alias);
            auto x = g.upload<T>(d.x), w = g.upload<T>(d.w), dout = g.upload<T>(d.dout);
            auto out = g.upload<T>(d.dx0), dx = g.upload<T>(d.dx0);
            auto rstd = g.upload<float>(std::vector<float>(size_t(s.N) * s.H, NAN));
            auto dw = g.upload<float>(d.dw0);
            const kernels::Exec ex = g.exec();
            kernels::rmsnorm_forward<T>(ex, out.get(), rstd.get(), x.get(), w.get(), s.N, s.H, s.D,
                                        s.ld, kEps);
            T* dxp = alias ? dout.get() : dx.get();
            kernels::rmsnorm_backward<T>(ex, dxp, acc, dw.get(), dout.get(), x.get(), w.get(),
                                         rstd.get(), s.N, s.H, s.D, s.ld);
            const std::string tag = std::string("rmsnorm ") + s.name + " mode " +
                                    std::to_string(mode) + " " + dtype_name<T>();
            check_twin(tag + " out", g.download(out), c.out, tol);
            check_twin(tag + " rstd", g.download(rstd), c.rstd, tol);
            check_twin(tag + " dx", alias ? g.download(dout) : g.download(dx), c.dx, tol);
            check_twin(tag + " dw", g.download(dw), c.dw, tol);
        }
    }
}

} // namespace

SOF_OP_GPU("rmsnorm", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: warp sums in fp32 vs the CPU's double sums; fixed-chunk column sums for dw
    gpu_cases<float>(*g, 1e-5);
    // bf16: out and dx rounded to bf16 (2^-9 relative); dw (fp32) holds the fp32 bound
    gpu_cases<core::bf16>(*g, 1e-2);
}
