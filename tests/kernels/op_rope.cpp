// Op driver cases of rope.h: rotate-half RoPE in place on strided heads (q and k inside a fused
// qkv row), and its backward; CPU twin vs double (backward = transpose, checked by finite
// differences), CUDA twin vs the CPU twin.
#include <cmath>

#include "harness.h"
#include "kernels/rope.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, H, hd;
    size_t ld;    // row stride
    size_t start; // the first head's offset in the row (k after NH query heads)
    int maxpos;
};
const Shape kShapes[] = {
    {"tiny", 1, 1, 2, 2, 0, 1},
    {"odd heads", 5, 3, 6, 3 * 6 + 4, 2, 9},
    {"q in fused qkv", 16, 4, 64, (4 + 2 * 2) * 64, 0, 40},
    {"k in fused qkv", 16, 2, 64, (4 + 2 * 2) * 64, 4 * 64, 40},
    {"realistic", 32, 12, 128, 3 * 12 * 128, 0, 4096},
};

// cos, sin (maxpos, hd/2) with the usual frequencies theta^(-2i/hd)
void tables(const Shape& s, std::vector<float>& c, std::vector<float>& sn) {
    const int half = s.hd / 2;
    c.resize(size_t(s.maxpos) * half);
    sn.resize(c.size());
    for (int p = 0; p < s.maxpos; p++)
        for (int i = 0; i < half; i++) {
            const double a = p * std::pow(10000.0, -2.0 * i / s.hd);
            c[size_t(p) * half + i] = float(std::cos(a));
            sn[size_t(p) * half + i] = float(std::sin(a));
        }
}

// the rotation (sign +1) or its transpose (sign -1) in double on the strided heads
std::vector<double> rotate_d(const std::vector<double>& x, const Shape& s,
                             const std::vector<float>& c, const std::vector<float>& sn,
                             const std::vector<int>& pos, double sign) {
    std::vector<double> y = x;
    const int half = s.hd / 2;
    for (int n = 0; n < s.N; n++)
        for (int h = 0; h < s.H; h++)
            for (int i = 0; i < half; i++) {
                const size_t o = size_t(n) * s.ld + s.start + size_t(h) * s.hd;
                const double cc = c[size_t(pos[n]) * half + i];
                const double ss = sign * sn[size_t(pos[n]) * half + i];
                const double a = x[o + i], b = x[o + i + half];
                y[o + i] = a * cc - b * ss;
                y[o + i + half] = b * cc + a * ss;
            }
    return y;
}

std::vector<double> rotate(const std::vector<float>& x, const Shape& s, const std::vector<float>& c,
                           const std::vector<float>& sn, const std::vector<int>& pos, double sign) {
    return rotate_d(to_double(x), s, c, sn, pos, sign);
}

} // namespace

SOF_OP_CPU("rope", "strided heads, forward and backward against double") {
    {
        // backward = the transpose of the forward: finite differences of sum(dout * rope(x))
        const Shape s{"fd", 2, 2, 4, 10, 1, 5};
        std::vector<float> c, sn;
        tables(s, c, sn);
        const std::vector<int> pos = {3, 1};
        const auto x = randn(size_t(s.N) * s.ld, 5), dout = randn(x.size(), 6);
        auto loss = [&](const std::vector<double>& xd) {
            const auto y = rotate_d(xd, s, c, sn, pos, 1.0); // untouched elements: identity
            double l = 0.0;
            for (size_t i = 0; i < y.size(); i++)
                l += dout[i] * y[i];
            return l;
        };
        check_close("rope reference backward vs finite differences",
                    rotate(dout, s, c, sn, pos, -1.0), numeric_grad(loss, to_double(x), 1e-3),
                    1e-7);
    }
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name);
        std::vector<float> c, sn;
        tables(s, c, sn);
        const auto pos = randint(s.N, 3, 0, s.maxpos - 1);
        const auto x = randn(size_t(s.N) * s.ld, 1);
        std::vector<float> y = x, dx = x;
        kernels::rope_forward(kernels::cpu_exec(), y.data() + s.start, c.data(), sn.data(),
                              pos.data(), s.N, s.H, s.hd, s.ld);
        kernels::rope_backward(kernels::cpu_exec(), dx.data() + s.start, c.data(), sn.data(),
                               pos.data(), s.N, s.H, s.hd, s.ld);
        const std::string tag = std::string("rope ") + s.name;
        // two fp32 products and a sum per element: an ulp or two of the largest value
        check_ref(tag + " forward", y, rotate(x, s, c, sn, pos, 1.0), 1e-6);
        check_ref(tag + " backward", dx, rotate(x, s, c, sn, pos, -1.0), 1e-6);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " " << dtype_name<T>());
        std::vector<float> c, sn;
        tables(s, c, sn);
        const auto pos = randint(s.N, 4, 0, s.maxpos - 1);
        const auto x = representable<T>(randn(size_t(s.N) * s.ld, 2));
        std::vector<float> y = x, dx = x;
        kernels::rope_forward(kernels::cpu_exec(), y.data() + s.start, c.data(), sn.data(),
                              pos.data(), s.N, s.H, s.hd, s.ld);
        kernels::rope_backward(kernels::cpu_exec(), dx.data() + s.start, c.data(), sn.data(),
                               pos.data(), s.N, s.H, s.hd, s.ld);
        auto dc = g.upload<float>(c), ds = g.upload<float>(sn);
        auto dpos = g.upload_ids(pos);
        auto dy = g.upload<T>(x), ddx = g.upload<T>(x);
        kernels::rope_forward<T>(g.exec(), dy.get() + s.start, dc.get(), ds.get(), dpos.get(), s.N,
                                 s.H, s.hd, s.ld);
        kernels::rope_backward<T>(g.exec(), ddx.get() + s.start, dc.get(), ds.get(), dpos.get(),
                                  s.N, s.H, s.hd, s.ld);
        const std::string tag = std::string("rope ") + s.name + " " + dtype_name<T>();
        check_twin(tag + " forward", g.download(dy), y, tol);
        check_twin(tag + " backward", g.download(ddx), dx, tol);
    }
}

} // namespace

SOF_OP_GPU("rope", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: the same products (an FMA may fuse one of them): an ulp of the largest value
    gpu_cases<float>(*g, 1e-6);
    // bf16: the rotated values rounded to bf16 (2^-9 relative)
    gpu_cases<core::bf16>(*g, 1e-2);
}
