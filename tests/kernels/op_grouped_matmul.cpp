// Op driver cases of grouped_matmul.h: forward, dX, dW and dbias against double per expert
// (experts without rows keep their grads), against the dense matmul op, threads; the CUDA twin.
#include <omp.h>

#include <cmath>
#include <string>

#include "harness.h"
#include "kernels/grouped_matmul.h"
#include "kernels/matmul.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Case {
    const char* name;
    int C, OC;
    std::vector<int> rows; // per expert
    bool bias;
};
const Case kCases[] = {
    {"tiny", 1, 1, {1}, false},
    // empty experts first, in the middle and last; rows across the CPU tile (64) and OC across
    // 256
    {"odd", 37, 300, {0, 3, 70, 0, 1, 129, 0}, true},
    {"gpt-oss-like", 96, 192, {33, 0, 17, 65, 2, 9, 40, 1}, true},
    {"qwen3moe-like", 128, 96, {5, 12, 0, 7, 30, 1, 0, 22, 3, 9, 14, 2, 0, 8, 6, 11}, false},
};

struct Data {
    std::vector<int> off;
    std::vector<float> inp, w, bias, dout, dw0, db0;
};

Data make(const Case& c, uint32_t seed) {
    Data d;
    const int E = static_cast<int>(c.rows.size());
    d.off.push_back(0);
    for (int r : c.rows)
        d.off.push_back(d.off.back() + r);
    const size_t P = static_cast<size_t>(d.off.back());
    d.inp = randn(P * c.C, seed);
    d.w = randn(static_cast<size_t>(E) * c.OC * c.C, seed + 1, 0.2f);
    if (c.bias) d.bias = randn(static_cast<size_t>(E) * c.OC, seed + 2);
    d.dout = randn(P * c.OC, seed + 3);
    d.dw0 = randn(d.w.size(), seed + 4); // grads accumulate onto these
    d.db0 = randn(static_cast<size_t>(E) * c.OC, seed + 5);
    return d;
}

kernels::GroupedShape shape_of(const Case& c, const Data& d) {
    kernels::GroupedShape s;
    s.E = static_cast<int>(c.rows.size());
    s.C = c.C;
    s.OC = c.OC;
    s.offsets = d.off.data();
    s.host_offsets = d.off.data();
    return s;
}

struct Outs {
    std::vector<float> out, dinp, dw, db;
};

Outs run_cpu(const Case& c, const Data& d) {
    const kernels::GroupedShape s = shape_of(c, d);
    const size_t P = static_cast<size_t>(d.off.back());
    Outs o;
    o.out.assign(P * c.OC, NAN);
    o.dinp.assign(P * c.C, NAN);
    o.dw = d.dw0;
    o.db = d.db0;
    const auto ex = kernels::cpu_exec();
    kernels::grouped_matmul_forward(ex, o.out.data(), d.inp.data(), d.w.data(),
                                    c.bias ? d.bias.data() : nullptr, s);
    kernels::grouped_matmul_backward(ex, o.dinp.data(), o.dw.data(), c.bias ? o.db.data() : nullptr,
                                     d.dout.data(), d.inp.data(), d.w.data(), s);
    return o;
}

} // namespace

SOF_OP_CPU("grouped_matmul", "forward, dX, dW, dbias against double; empty experts untouched") {
    for (const Case& c : kCases) {
        INFO("case " << c.name);
        const Data d = make(c, 7);
        const Outs o = run_cpu(c, d);
        const int E = static_cast<int>(c.rows.size());
        const size_t P = static_cast<size_t>(d.off.back());
        std::vector<double> out(P * c.OC), dinp(P * c.C, 0.0), dw(d.dw0.begin(), d.dw0.end());
        std::vector<double> db(d.db0.begin(), d.db0.end());
        for (int e = 0; e < E; e++) {
            const float* we = d.w.data() + static_cast<size_t>(e) * c.OC * c.C;
            for (int r = d.off[static_cast<size_t>(e)]; r < d.off[static_cast<size_t>(e) + 1];
                 r++) {
                const float* x = d.inp.data() + static_cast<size_t>(r) * c.C;
                const float* g = d.dout.data() + static_cast<size_t>(r) * c.OC;
                for (int o2 = 0; o2 < c.OC; o2++) {
                    double acc = c.bias ? d.bias[static_cast<size_t>(e) * c.OC + o2] : 0.0;
                    for (int i = 0; i < c.C; i++) {
                        acc += static_cast<double>(x[i]) * we[static_cast<size_t>(o2) * c.C + i];
                        dinp[static_cast<size_t>(r) * c.C + i] +=
                            static_cast<double>(g[o2]) * we[static_cast<size_t>(o2) * c.C + i];
                        dw[(static_cast<size_t>(e) * c.OC + o2) * c.C + i] +=
                            static_cast<double>(g[o2]) * x[i];
                    }
                    out[static_cast<size_t>(r) * c.OC + o2] = acc;
                    db[static_cast<size_t>(e) * c.OC + o2] += g[o2];
                }
            }
        }
        const std::string t = std::string("grouped_matmul ") + c.name;
        // fp32 dot products of up to 300 terms against double (measured <= 6e-7): the dense
        // matmul's threshold
        check_ref(t + " forward", o.out, out, 1e-5);
        check_ref(t + " dinp", o.dinp, dinp, 1e-5);
        check_ref(t + " dw", o.dw, dw, 1e-5);
        if (c.bias) check_ref(t + " dbias", o.db, db, 1e-5);
        // an expert without rows keeps its accumulated grads bit for bit
        for (int e = 0; e < E; e++) {
            if (c.rows[static_cast<size_t>(e)] != 0) continue;
            const size_t w0 = static_cast<size_t>(e) * c.OC * c.C;
            CHECK(std::equal(o.dw.begin() + static_cast<long>(w0),
                             o.dw.begin() + static_cast<long>(w0 + static_cast<size_t>(c.OC) * c.C),
                             d.dw0.begin() + static_cast<long>(w0)));
            if (c.bias)
                CHECK(std::equal(o.db.begin() + static_cast<long>(e) * c.OC,
                                 o.db.begin() + static_cast<long>(e + 1) * c.OC,
                                 d.db0.begin() + static_cast<long>(e) * c.OC));
        }
        // each expert's block is the dense matmul op on its rows, bit for bit (the same tiles)
        for (int e = 0; e < E; e++) {
            const int rows = c.rows[static_cast<size_t>(e)];
            if (rows == 0) continue;
            const int r0 = d.off[static_cast<size_t>(e)];
            std::vector<float> dense(static_cast<size_t>(rows) * c.OC);
            kernels::matmul_forward(
                kernels::cpu_exec(), dense.data(), static_cast<float*>(nullptr),
                d.inp.data() + static_cast<size_t>(r0) * c.C,
                d.w.data() + static_cast<size_t>(e) * c.OC * c.C,
                c.bias ? d.bias.data() + static_cast<size_t>(e) * c.OC : nullptr, rows, c.C, c.OC);
            CHECK(std::equal(dense.begin(), dense.end(),
                             o.out.begin() + static_cast<long>(r0) * c.OC));
        }
    }
}

SOF_OP_CPU("grouped_matmul", "bitwise the same for 1 and 2 OpenMP threads") {
    const Case& c = kCases[2];
    const Data d = make(c, 17);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const Outs a = run_cpu(c, d);
    omp_set_num_threads(2);
    const Outs b = run_cpu(c, d);
    omp_set_num_threads(saved);
    check_bitwise("grouped_matmul out, 1 vs 2 threads", a.out, b.out);
    check_bitwise("grouped_matmul dinp, 1 vs 2 threads", a.dinp, b.dinp);
    check_bitwise("grouped_matmul dw, 1 vs 2 threads", a.dw, b.dw);
    check_bitwise("grouped_matmul dbias, 1 vs 2 threads", a.db, b.db);
}

SOF_OP_CPU("grouped_matmul", "bad offsets and shapes are refused with the value named") {
    std::vector<float> buf(64);
    std::vector<int> off = {0, 3, 2};
    kernels::GroupedShape s;
    s.E = 2;
    s.C = 2;
    s.OC = 2;
    s.offsets = s.host_offsets = off.data();
    CHECK_THROWS_WITH_AS(kernels::grouped_matmul_forward(kernels::cpu_exec(), buf.data(),
                                                         buf.data(), buf.data(),
                                                         static_cast<const float*>(nullptr), s),
                         doctest::Contains("decrease at expert 1"), core::Error);
    off = {1, 2, 3};
    CHECK_THROWS_WITH_AS(kernels::grouped_matmul_forward(kernels::cpu_exec(), buf.data(),
                                                         buf.data(), buf.data(),
                                                         static_cast<const float*>(nullptr), s),
                         doctest::Contains("host_offsets[0] = 1"), core::Error);
    s.OC = 0;
    CHECK_THROWS_WITH_AS(kernels::grouped_matmul_backward(kernels::cpu_exec(), buf.data(),
                                                          buf.data(), buf.data(), buf.data(),
                                                          buf.data(), buf.data(), s),
                         doctest::Contains("bad shape"), core::Error);
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol, double tol_dw) {
    for (const Case& c : kCases) {
        INFO("case " << c.name << " " << dtype_name<T>());
        Data d = make(c, 27);
        d.inp = representable<T>(d.inp);
        d.w = representable<T>(d.w);
        d.dout = representable<T>(d.dout);
        if (c.bias) d.bias = representable<T>(d.bias);
        const Outs cpu = run_cpu(c, d);
        const size_t P = static_cast<size_t>(d.off.back());
        auto doff = g.upload_ids(d.off);
        kernels::GroupedShape s = shape_of(c, d);
        s.offsets = doff.get();
        auto din = g.upload<T>(d.inp), dwt = g.upload<T>(d.w), ddo = g.upload<T>(d.dout);
        DevBuf<T> dbias = c.bias ? g.upload<T>(d.bias) : DevBuf<T>();
        auto dout = g.upload<T>(std::vector<float>(P * c.OC, NAN));
        auto ddin = g.upload<T>(std::vector<float>(P * c.C, NAN));
        auto ddw = g.upload<float>(d.dw0), ddb = g.upload<float>(d.db0);
        kernels::grouped_matmul_forward<T>(g.exec(), dout.get(), din.get(), dwt.get(),
                                           c.bias ? dbias.get() : nullptr, s);
        kernels::grouped_matmul_backward<T>(g.exec(), ddin.get(), ddw.get(),
                                            c.bias ? ddb.get() : nullptr, ddo.get(), din.get(),
                                            dwt.get(), s);
        const std::string t = std::string("grouped_matmul ") + c.name + " " + dtype_name<T>();
        check_twin(t + " forward", g.download(dout), cpu.out, tol);
        check_twin(t + " dinp", g.download(ddin), cpu.dinp, tol);
        check_twin(t + " dw", g.download(ddw), cpu.dw, tol_dw);
        if (c.bias) check_twin(t + " dbias", g.download(ddb), cpu.db, 1e-6);
        // twice from the same start: the same bits (no atomics)
        auto ddw2 = g.upload<float>(d.dw0);
        auto ddin2 = g.upload<T>(std::vector<float>(P * c.C, NAN));
        kernels::grouped_matmul_backward<T>(g.exec(), ddin2.get(), ddw2.get(), nullptr, ddo.get(),
                                            din.get(), dwt.get(), s);
        check_bitwise(t + " dw repeat", g.download(ddw2), g.download(ddw));
        check_bitwise(t + " dinp repeat", g.download(ddin2), g.download(ddin));
    }
}

} // namespace

SOF_OP_GPU("grouped_matmul", "fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: fp32 FMAs in cuBLAS's order (matmul's threshold)
    gpu_cases<float>(*g, 1e-5, 1e-5);
    // bf16 in, fp32 accumulate: outputs rounded once to bf16; dw stays fp32 (the inputs are the
    // same representable values on both twins), only the order of the fp32 sums differs
    gpu_cases<core::bf16>(*g, 1e-2, 1e-5);
}
