// Op driver cases of layernorm.h: forward (mean, rstd kept) and backward into accumulated dinp,
// dw, db; CPU twin vs double (backward checked by finite differences), CUDA twin vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/layernorm.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, C;
};
// warp tails (C % 32), row tails (N % 8 rows per block), channel blocks (64) and chunk tails
const Shape kShapes[] = {
    {"tiny", 1, 2}, {"odd", 3, 5}, {"tails", 37, 129}, {"realistic", 64, 768}, {"tall", 300, 96}};

constexpr double kEps = 1e-5;

struct Ref {
    std::vector<double> out, mean, rstd, dinp, dw, db;
};

Ref ref(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
        const std::vector<float>& dout, const std::vector<float>& dinp0,
        const std::vector<float>& dw0, const std::vector<float>& db0, int N, int C) {
    Ref r;
    r.out.resize(x.size());
    r.mean.resize(N);
    r.rstd.resize(N);
    r.dinp = to_double(dinp0);
    r.dw = to_double(dw0);
    r.db = to_double(db0);
    for (int n = 0; n < N; n++) {
        const float* xr = x.data() + size_t(n) * C;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < C; i++)
            m += xr[i];
        m /= C;
        for (int i = 0; i < C; i++)
            v += (xr[i] - m) * (xr[i] - m);
        const double rs = 1.0 / std::sqrt(v / C + kEps);
        r.mean[n] = m;
        r.rstd[n] = rs;
        double s1 = 0.0, s2 = 0.0;
        for (int i = 0; i < C; i++) {
            const double norm = (xr[i] - m) * rs, d = dout[size_t(n) * C + i];
            r.out[size_t(n) * C + i] = norm * w[i] + b[i];
            s1 += w[i] * d;
            s2 += w[i] * d * norm;
            r.dw[i] += norm * d;
            r.db[i] += d;
        }
        for (int i = 0; i < C; i++) {
            const double norm = (xr[i] - m) * rs, dn = w[i] * double(dout[size_t(n) * C + i]);
            r.dinp[size_t(n) * C + i] += (dn - s1 / C - norm * s2 / C) * rs;
        }
    }
    return r;
}

struct Data {
    std::vector<float> x, w, b, dout, dinp0, dw0, db0;
};

Data make_data(const Shape& s, uint32_t seed) {
    Data d;
    const size_t nc = size_t(s.N) * s.C;
    d.x = randn(nc, seed, 2.0f);
    for (size_t i = 0; i < nc; i++)
        d.x[i] += 0.5f; // a mean to remove
    d.w = randn(s.C, seed + 1);
    d.b = randn(s.C, seed + 2);
    d.dout = randn(nc, seed + 3);
    d.dinp0 = randn(nc, seed + 4);
    d.dw0 = randn(s.C, seed + 5);
    d.db0 = randn(s.C, seed + 6);
    return d;
}

struct Out {
    std::vector<float> out, mean, rstd, dinp, dw, db;
};

Out run_cpu(const Data& d, const Shape& s) {
    Out o;
    o.out.assign(d.x.size(), NAN);
    o.mean.assign(s.N, NAN);
    o.rstd.assign(s.N, NAN);
    kernels::layernorm_forward(kernels::cpu_exec(), o.out.data(), o.mean.data(), o.rstd.data(),
                               d.x.data(), d.w.data(), d.b.data(), s.N, s.C);
    o.dinp = d.dinp0;
    o.dw = d.dw0;
    o.db = d.db0;
    kernels::layernorm_backward(kernels::cpu_exec(), o.dinp.data(), o.dw.data(), o.db.data(),
                                d.dout.data(), d.x.data(), d.w.data(), o.mean.data(), o.rstd.data(),
                                s.N, s.C);
    return o;
}

} // namespace

SOF_OP_CPU("layernorm", "forward and backward against double") {
    {
        // the reference backward vs finite differences of sum(dout * layernorm(x)) (x, w, b)
        const Shape s{"fd", 2, 6};
        const Data d = make_data(s, 40);
        const std::vector<float> zc(s.C, 0.0f), zn(d.x.size(), 0.0f);
        const Ref r = ref(d.x, d.w, d.b, d.dout, zn, zc, zc, s.N, s.C);
        auto loss = [&](const std::vector<double>& x) {
            double l = 0.0;
            for (int n = 0; n < s.N; n++) {
                double m = 0.0, v = 0.0;
                for (int i = 0; i < s.C; i++)
                    m += x[size_t(n) * s.C + i] / s.C;
                for (int i = 0; i < s.C; i++)
                    v += (x[size_t(n) * s.C + i] - m) * (x[size_t(n) * s.C + i] - m) / s.C;
                for (int i = 0; i < s.C; i++)
                    l += d.dout[size_t(n) * s.C + i] *
                         ((x[size_t(n) * s.C + i] - m) / std::sqrt(v + kEps) * d.w[i] + d.b[i]);
            }
            return l;
        };
        check_close("layernorm reference dinp vs finite differences", r.dinp,
                    numeric_grad(loss, to_double(d.x), 1e-6), 1e-7);
    }
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " N=" << s.N << " C=" << s.C);
        const Data d = make_data(s, 1);
        const Out o = run_cpu(d, s);
        const Ref r = ref(d.x, d.w, d.b, d.dout, d.dinp0, d.dw0, d.db0, s.N, s.C);
        const std::string tag = std::string("layernorm ") + s.name;
        // fp32 normalization of double-summed statistics: a few ulps of the largest value; the
        // column sums run over up to 300 rows in fp32
        check_ref(tag + " out", o.out, r.out, 1e-6);
        check_ref(tag + " mean", o.mean, r.mean, 1e-6);
        check_ref(tag + " rstd", o.rstd, r.rstd, 1e-6);
        check_ref(tag + " dinp (accumulated)", o.dinp, r.dinp, 1e-5);
        check_ref(tag + " dw (accumulated)", o.dw, r.dw, 1e-5);
        check_ref(tag + " db (accumulated)", o.db, r.db, 1e-5);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({"large", 4096, 1600});
    for (const Shape& s : shapes) {
        INFO("shape " << s.name << " N=" << s.N << " C=" << s.C << " " << dtype_name<T>());
        Data d = make_data(s, 2);
        for (auto* v : {&d.x, &d.w, &d.b, &d.dout, &d.dinp0})
            *v = representable<T>(*v);
        const Out c = run_cpu(d, s);
        std::vector<float> dw_runs[2];
        Out a;
        for (auto& dwr : dw_runs) {
            auto x = g.upload<T>(d.x), w = g.upload<T>(d.w), b = g.upload<T>(d.b);
            auto dout = g.upload<T>(d.dout), dinp = g.upload<T>(d.dinp0);
            auto out = g.upload<T>(std::vector<float>(d.x.size(), NAN));
            auto mean = g.upload<float>(std::vector<float>(s.N, NAN));
            auto rstd = g.upload<float>(std::vector<float>(s.N, NAN));
            auto dw = g.upload<float>(d.dw0), db = g.upload<float>(d.db0);
            const kernels::Exec ex = g.exec();
            kernels::layernorm_forward<T>(ex, out.get(), mean.get(), rstd.get(), x.get(), w.get(),
                                          b.get(), s.N, s.C);
            kernels::layernorm_backward<T>(ex, dinp.get(), dw.get(), db.get(), dout.get(), x.get(),
                                           w.get(), mean.get(), rstd.get(), s.N, s.C);
            a = Out{g.download(out),  g.download(mean), g.download(rstd),
                    g.download(dinp), g.download(dw),   g.download(db)};
            dwr = a.dw;
        }
        const std::string tag = std::string("layernorm ") + s.name + " " + dtype_name<T>();
        check_twin(tag + " out", a.out, c.out, tol);
        check_twin(tag + " mean", a.mean, c.mean, tol);
        check_twin(tag + " rstd", a.rstd, c.rstd, tol);
        check_twin(tag + " dinp", a.dinp, c.dinp, tol);
        check_twin(tag + " dw", a.dw, c.dw, tol);
        check_twin(tag + " db", a.db, c.db, tol);
        check_bitwise(tag + " dw, second run", dw_runs[1], dw_runs[0]);
    }
}

} // namespace

SOF_OP_GPU("layernorm", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: warp sums in fp32 vs the CPU's double sums, column sums in another fixed order:
    // ~1e-6 of the largest value
    gpu_cases<float>(*g, 1e-5);
    // bf16: out and dinp rounded to bf16 (2^-9 relative); the fp32 outputs hold the fp32 bound
    gpu_cases<core::bf16>(*g, 1e-2);
}
