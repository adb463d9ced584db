// cpu_adam scalar variant: step_elem per element (std::fma), runs on any x86-64 (and any other)
// CPU. Used when neither AVX2+FMA nor AVX-512 is available, or forced with SOF_CPU_ADAM_VARIANT.
#include "cpu_adam_kernels.h"

namespace sof::cpu_adam {

namespace {

double step_tile_scalar(const StepConsts& c, const Tile& t, bool /*nt*/) {
    double sumsq = 0.0;
    for (int64_t i = 0; i < t.n; i++) {
        float graw = optim::adam_ref_grad(t.g, t.gd, i);
        float gs = graw * c.scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
        step_tile_elem(c, t, i, graw);
    }
    return sumsq;
}

double step_tile_q(const StepConsts& c, const Tile& t, bool /*nt*/) {
    return step_tile_q_scalar(c, t);
}

double stats_tile_scalar(const void* g, int32_t gd, int64_t n, float scale) {
    double sumsq = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float gs = optim::adam_ref_grad(g, gd, i) * scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
    }
    return sumsq;
}

} // namespace

KernelSet scalar_kernels() {
    return {"scalar", step_tile_scalar, stats_tile_scalar, step_tile_q, "scalar", "scalar"};
}

} // namespace sof::cpu_adam
