// Op driver cases of bias_grad.h: dbias (OC) += column sums of dout (N,OC); CPU twin vs a double
// loop, CUDA twin (fixed-chunk column sums, fp32 and bf16 dout) vs the CPU twin, reproducibly.
#include "harness.h"
#include "kernels/bias_grad.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    int N, OC;
};

// the CPU twin's channel blocks (64) and the CUDA twin's 32-column tiles, 64-row chunks, the
// chunk size growing past 128 chunks (N > 8192) and columns in more than one group of
// kernels::kColGroup (4096: the scratch holds one group's partials)
const Shape kShapes[] = {
    {"tiny", 1, 1},           {"odd", 5, 37},          {"chunk tails", 257, 130},
    {"realistic", 1024, 768}, {"long rows", 9000, 40}, {"column groups", 70, 2 * 4096 + 45},
};

std::vector<float> run_cpu(const std::vector<float>& db0, const std::vector<float>& dout,
                           const Shape& s) {
    std::vector<float> db = db0;
    kernels::bias_grad(kernels::cpu_exec(), db.data(), dout.data(), s.N, s.OC);
    return db;
}

} // namespace

SOF_OP_CPU("bias_grad", "column sums against a double loop") {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " N=" << s.N << " OC=" << s.OC);
        const auto dout = randn(static_cast<size_t>(s.N) * s.OC, 3);
        const auto db0 = randn(s.OC, 4);
        std::vector<double> ref = to_double(db0);
        for (int n = 0; n < s.N; n++)
            for (int o = 0; o < s.OC; o++)
                ref[o] += dout[static_cast<size_t>(n) * s.OC + o];
        // fp32 running sums of up to 9000 terms of N(0,1): ~1e-6 of the largest sum
        check_ref(std::string("bias_grad ") + s.name, run_cpu(db0, dout, s), ref, 1e-5);
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " N=" << s.N << " OC=" << s.OC << " " << dtype_name<T>());
        const auto dout = representable<T>(randn(static_cast<size_t>(s.N) * s.OC, 5));
        const auto db0 = randn(s.OC, 6);
        const auto cpu = run_cpu(db0, dout, s);
        auto ddout = g.upload<T>(dout);
        std::vector<float> runs[2];
        for (auto& r : runs) {
            auto db = g.upload<float>(db0);
            kernels::bias_grad<T>(g.exec(), db.get(), ddout.get(), s.N, s.OC);
            r = g.download(db);
        }
        const std::string tag = std::string("bias_grad ") + s.name + " " + dtype_name<T>();
        check_twin(tag, runs[0], cpu, tol);
        check_bitwise(tag + ", second run", runs[1], runs[0]);
    }
}

} // namespace

SOF_OP_GPU("bias_grad", "fixed-chunk column sums against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32 sums of the same values in another (fixed) order: ~1e-6 of the largest sum
    gpu_cases<float>(*g, 1e-5);
    // bf16 dout (the same rounded values on both twins), fp32 sums: the fp32 bound holds too
    gpu_cases<core::bf16>(*g, 1e-5);
}
