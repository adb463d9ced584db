// CPU twin of dropout.h (and the key resolution both twins and attention use): the mask of a
// batch row's elements, one Philox draw per four consecutive global indices, OpenMP over rows.
#include "kernels/dropout.h"

#include <cmath>

namespace sof::kernels {

DropoutMask dropout_mask(float p, const DropoutKey& k, const char* op) {
    if (!(p >= 0.0f && p < 1.0f))
        SOF_FAIL(Config, "%s: dropout rate p = %g outside [0, 1)", op, static_cast<double>(p));
    if (k.micro >= (1u << 16))
        SOF_FAIL(Config, "%s: dropout key micro-step %u is not below 65536", op, k.micro);
    if (k.layer >= (1u << 12))
        SOF_FAIL(Config, "%s: dropout key layer %u is not below 4096", op, k.layer);
    const uint32_t tag = static_cast<uint32_t>(k.tag);
    if (tag >= 16u) SOF_FAIL(Config, "%s: dropout key tag %u is not below 16", op, tag);
    DropoutMask m;
    m.seed = k.seed;
    m.a = k.step;
    m.b = k.micro << 16 | k.layer << 4 | tag;
    const double thr = std::nearbyint(static_cast<double>(p) * 4294967296.0);
    m.threshold = static_cast<uint32_t>(std::fmin(thr, 4294967295.0));
    m.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
    if (m.threshold == 0u) m.scale = 1.0f;
    return m;
}

namespace detail {
void check_dropout_args(const DropoutArgs& a, const char* op, int* tokens) {
    if (a.B < 0 || a.T < 0 || a.C < 0)
        SOF_FAIL(Config, "%s: bad shape B=%d T=%d C=%d", op, a.B, a.T, a.C);
    const int n = a.key.tokens > 0 ? a.key.tokens : a.T;
    if (a.key.token0 < 0 || static_cast<long>(a.key.token0) + a.T > n)
        SOF_FAIL(Config, "%s: tokens %d..%d of the call outside the global sequence of %d", op,
                 a.key.token0, a.key.token0 + a.T, n);
    if (!global_index_fits(a.key.batch0, static_cast<uint64_t>(a.B),
                           static_cast<uint64_t>(n) * static_cast<uint64_t>(a.C)))
        SOF_FAIL(Config, "%s: global element indices overflow 64 bits (batch0=%llu B=%d)", op,
                 static_cast<unsigned long long>(a.key.batch0), a.B);
    *tokens = n;
}
} // namespace detail

namespace cpu {

void dropout_forward(float* out, const float* x, const DropoutArgs& a) {
    const char* op = "dropout";
    int tokens = 0;
    detail::check_dropout_args(a, op, &tokens);
    const DropoutMask m = dropout_mask(a.p, a.key, op);
    const long rows = static_cast<long>(a.B) * a.T;
    const size_t C = static_cast<size_t>(a.C);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const int b = static_cast<int>(r / a.T), t = static_cast<int>(r % a.T);
        const uint64_t e0 =
            ((a.key.batch0 + b) * static_cast<uint64_t>(tokens) + a.key.token0 + t) * C;
        const float* src = x + static_cast<size_t>(r) * C;
        float* dst = out + static_cast<size_t>(r) * C;
        if (!m.active()) {
            for (size_t c = 0; c < C; c++)
                dst[c] = src[c];
            continue;
        }
        core::Philox4 w{};
        uint64_t group = ~uint64_t{0};
        for (size_t c = 0; c < C; c++) {
            const uint64_t e = e0 + c;
            if ((e >> 2) != group) {
                group = e >> 2;
                w = m.draw(e);
            }
            dst[c] = m.keep_word(w.v[e & 3u]) ? src[c] * m.scale : 0.0f;
        }
    }
}

} // namespace cpu
} // namespace sof::kernels
