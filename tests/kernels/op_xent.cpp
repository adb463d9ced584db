// Op driver cases of xent.h: fused softmax cross-entropy over the first V of Vp columns, ignored
// targets (< 0), stats (max, 1/sum), the backward over the logits; CPU twin vs double (gradient
// checked by finite differences), CUDA twin vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/xent.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, V, Vp;
};
const Shape kShapes[] = {
    {"tiny", 1, 1, 1},
    {"padded", 3, 5, 8},
    {"odd, ignored rows", 7, 101, 128},
    {"realistic GPT-2 vocab", 8, 50257, 50304},
};

std::vector<int> targets(const Shape& s, uint32_t seed) {
    auto t = randint(s.N, seed, 0, s.V - 1);
    for (int n = 1; n < s.N; n += 3)
        t[n] = -1; // ignored positions (loss mask)
    return t;
}

struct Ref {
    std::vector<double> loss, maxv, inv, dlogits;
};

Ref ref(const std::vector<float>& lg, const std::vector<int>& t, const Shape& s, double dloss) {
    Ref r;
    r.loss.resize(s.N);
    r.maxv.resize(s.N);
    r.inv.resize(s.N);
    r.dlogits.assign(size_t(s.N) * s.Vp, 0.0);
    for (int n = 0; n < s.N; n++) {
        const float* x = lg.data() + size_t(n) * s.Vp;
        double m = -INFINITY, sum = 0.0;
        for (int i = 0; i < s.V; i++)
            m = std::max(m, double(x[i]));
        for (int i = 0; i < s.V; i++)
            sum += std::exp(x[i] - m);
        r.maxv[n] = m;
        r.inv[n] = 1.0 / sum;
        r.loss[n] = t[n] < 0 ? 0.0 : std::log(sum) + m - x[t[n]];
        if (t[n] < 0) continue;
        for (int i = 0; i < s.V; i++)
            r.dlogits[size_t(n) * s.Vp + i] = (std::exp(x[i] - m) / sum - (i == t[n])) * dloss;
    }
    return r;
}

// the entries of dlogits away from each row's target (their size is p, not 1)
std::vector<float> off_target(const std::vector<float>& d, const std::vector<int>& t,
                              const Shape& s) {
    std::vector<float> r = d;
    for (int n = 0; n < s.N; n++)
        if (t[n] >= 0) r[size_t(n) * s.Vp + t[n]] = 0.0f;
    return r;
}
std::vector<double> off_target(const std::vector<double>& d, const std::vector<int>& t,
                               const Shape& s) {
    std::vector<double> r = d;
    for (int n = 0; n < s.N; n++)
        if (t[n] >= 0) r[size_t(n) * s.Vp + t[n]] = 0.0;
    return r;
}

struct Out {
    std::vector<float> loss, maxv, inv, dlogits;
};

Out split(const std::vector<float>& loss, const std::vector<float>& stats,
          const std::vector<float>& d) {
    Out o{loss, {}, {}, d};
    for (size_t n = 0; n < loss.size(); n++) {
        o.maxv.push_back(stats[2 * n]);
        o.inv.push_back(stats[2 * n + 1]);
    }
    return o;
}

Out run_cpu(const std::vector<float>& lg, const std::vector<int>& t, const Shape& s, float dloss) {
    std::vector<float> loss(s.N, NAN), stats(2 * size_t(s.N), NAN);
    kernels::xent_forward(kernels::cpu_exec(), loss.data(), stats.data(), lg.data(), t.data(), s.N,
                          s.V, s.Vp);
    std::vector<float> d = lg; // dlogits over the logits
    kernels::xent_backward(kernels::cpu_exec(), d.data(), d.data(), stats.data(), t.data(), dloss,
                           s.N, s.V, s.Vp);
    return split(loss, stats, d);
}

void check_all(const std::string& tag, const Out& o, const Ref& r, const std::vector<int>& t,
               const Shape& s, double tol) {
    check_ref(tag + " losses", o.loss, r.loss, tol);
    check_ref(tag + " max", o.maxv, r.maxv, tol);
    check_ref(tag + " 1/sum", o.inv, r.inv, tol);
    check_ref(tag + " dlogits", o.dlogits, r.dlogits, tol);
    check_ref(tag + " dlogits off target", off_target(o.dlogits, t, s), off_target(r.dlogits, t, s),
              tol);
}

} // namespace

SOF_OP_CPU("xent", "losses, stats and dlogits against double") {
    {
        // the reference dlogits vs finite differences of dloss * sum of the losses
        const Shape s{"fd", 3, 6, 8};
        const auto lg = randn(size_t(s.N) * s.Vp, 8, 2.0f);
        const auto t = targets(s, 9);
        const Ref r = ref(lg, t, s, 0.5);
        auto loss = [&](const std::vector<double>& x) {
            double l = 0.0;
            for (int n = 0; n < s.N; n++) {
                if (t[n] < 0) continue;
                double sum = 0.0;
                for (int i = 0; i < s.V; i++)
                    sum += std::exp(x[size_t(n) * s.Vp + i]);
                l += 0.5 * (std::log(sum) - x[size_t(n) * s.Vp + t[n]]);
            }
            return l;
        };
        check_close("xent reference dlogits vs finite differences", r.dlogits,
                    numeric_grad(loss, to_double(lg), 1e-6), 1e-7);
    }
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name);
        const auto lg = randn(size_t(s.N) * s.Vp, 1, 3.0f);
        const auto t = targets(s, 2);
        const Out o = run_cpu(lg, t, s, 1.0f / 3);
        // double sums, fp32 exp and log: a few ulps of each output's largest value
        check_all(std::string("xent ") + s.name, o, ref(lg, t, s, 1.0 / 3), t, s, 1e-5);
        // targets = null: stats only, the same as with targets
        std::vector<float> stats(2 * size_t(s.N));
        kernels::xent_forward(kernels::cpu_exec(), nullptr, stats.data(), lg.data(), nullptr, s.N,
                              s.V, s.Vp);
        check_bitwise(std::string("xent ") + s.name + " max without targets",
                      split(std::vector<float>(s.N), stats, {}).maxv, o.maxv);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({"Qwen vocab", 64, 151936, 151936});
    for (const Shape& s : shapes) {
        INFO("shape " << s.name << " " << dtype_name<T>());
        const auto lg = representable<T>(randn(size_t(s.N) * s.Vp, 3, 3.0f));
        const auto t = targets(s, 4);
        const Out c = run_cpu(lg, t, s, 0.25f);
        auto dlg = g.upload<T>(lg);
        auto dt = g.upload_ids(t);
        auto loss = g.upload<float>(std::vector<float>(s.N, NAN));
        auto stats = g.upload<float>(std::vector<float>(2 * size_t(s.N), NAN));
        kernels::xent_forward<T>(g.exec(), loss.get(), stats.get(), dlg.get(), dt.get(), s.N, s.V,
                                 s.Vp);
        kernels::xent_backward<T>(g.exec(), dlg.get(), dlg.get(), stats.get(), dt.get(), 0.25f, s.N,
                                  s.V, s.Vp); // over the logits
        const Out a = split(g.download(loss), g.download(stats), g.download(dlg));
        const std::string tag = std::string("xent ") + s.name + " " + dtype_name<T>();
        check_twin(tag + " losses", a.loss, c.loss, tol);
        check_twin(tag + " max", a.maxv, c.maxv, tol);
        check_twin(tag + " 1/sum", a.inv, c.inv, tol);
        check_twin(tag + " dlogits", a.dlogits, c.dlogits, tol);
        check_twin(tag + " dlogits off target", off_target(a.dlogits, t, s),
                   off_target(c.dlogits, t, s), tol);
    }
}

} // namespace

SOF_OP_GPU("xent", "fp32 and bf16 logits against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: block sums of expf in fp32 (fixed tree) vs double sums: ~1e-6 of each output's max
    gpu_cases<float>(*g, 1e-5);
    // bf16 logits (the same rounded values on both twins): losses and stats are fp32 and hold
    // the fp32 bound; dlogits are rounded to bf16 (2^-9 relative): 1e-2
    gpu_cases<core::bf16>(*g, 1e-2);
}
