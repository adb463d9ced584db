// GPT-OSS's transposed expert tensors (hf_experts.h): whole experts read in file order, then
// transposed into the rank's slice; the export's transposed copy.
#include "ckpt/hf_experts.h"

#include <algorithm>

#include "core/error.h"

namespace sof::ckpt {

void plan_transposed_reads(const SafetensorsFile::Tensor* st, size_t first, size_t last, float* dst,
                           std::vector<SafetensorsFile::F32Read>* reads,
                           std::vector<TransposedRead>* fix) {
    if (st->shape.size() != 3)
        SOF_FAIL(Internal, "plan_transposed_reads: '%s' is not an (E, X, R) tensor",
                 st->name.c_str());
    const size_t X = static_cast<size_t>(st->shape[1]), R = static_cast<size_t>(st->shape[2]);
    const size_t RX = R * X;
    if (RX == 0 || first >= last) return;
    for (size_t e = first / RX; e * RX < last; e++) {
        const size_t lo = std::max(first, e * RX), hi = std::min(last, (e + 1) * RX);
        TransposedRead f;
        f.dst = dst + (lo - first);
        f.from = lo - e * RX;
        f.n = hi - lo;
        f.R = R;
        f.X = X;
        if (f.n == RX) {
            f.buf = f.dst; // the whole expert: read in place
        } else {
            f.own.resize(RX);
            f.buf = f.own.data();
        }
        reads->push_back({st, e * RX, RX, f.buf});
        fix->push_back(std::move(f)); // a vector's move keeps its buffer: buf stays valid
    }
}

void finish_transposed_reads(std::vector<TransposedRead>* fix) {
    std::vector<float> t;
    for (TransposedRead& f : *fix) {
        t.resize(f.R * f.X);
        for (size_t x = 0; x < f.X; x++) // file (x, r) -> ours (r, x)
            for (size_t r = 0; r < f.R; r++)
                t[r * f.X + x] = f.buf[x * f.R + r];
        std::copy(t.begin() + static_cast<std::ptrdiff_t>(f.from),
                  t.begin() + static_cast<std::ptrdiff_t>(f.from + f.n), f.dst);
        f.own.clear();
        f.own.shrink_to_fit();
    }
}

void transpose_experts(const float* src, size_t E, size_t R, size_t X, float* out) {
    for (size_t e = 0; e < E; e++) {
        const float* s = src + e * R * X;
        float* o = out + e * R * X;
        for (size_t r = 0; r < R; r++)
            for (size_t x = 0; x < X; x++)
                o[x * R + r] = s[r * X + x];
    }
}

} // namespace sof::ckpt
