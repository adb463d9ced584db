// Helpers for the model tests: per-tensor error statistics against the PyTorch reference and a
// loader for tests/data/gpt2_ref.bin relative to the source tree.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpt2_reference.h"

namespace sof::testing {

inline const Gpt2Reference& gpt2_ref() {
    static const Gpt2Reference ref =
        load_gpt2_reference(std::string(SOF_SOURCE_DIR) + "/tests/data/gpt2_ref.bin");
    return ref;
}

// Error of `got` against `want` (same length). rel is the largest element error divided by the
// tensor's largest reference magnitude (a scale-aware relative error that does not blow up on
// elements that are zero or nearly zero in the reference).
struct ErrStats {
    double max_abs = 0; // max |got - want|
    double max_ref = 0; // max |want|
    double rel = 0;     // max_abs / max_ref (0 when both are all zero)
    bool finite = true;
};

inline ErrStats compare(const float* got, const float* want, size_t n) {
    ErrStats s;
    for (size_t i = 0; i < n; i++) {
        if (!std::isfinite(got[i])) s.finite = false;
        s.max_abs = std::max(s.max_abs, std::fabs(static_cast<double>(got[i]) - want[i]));
        s.max_ref = std::max(s.max_ref, std::fabs(static_cast<double>(want[i])));
    }
    s.rel = s.max_ref > 0 ? s.max_abs / s.max_ref : (s.max_abs > 0 ? INFINITY : 0.0);
    return s;
}

inline void print_err(const char* what, const std::string& name, const ErrStats& s) {
    std::printf("  %-7s %-9s max|ref| %.3e  max abs err %.3e  rel %.3e\n", what, name.c_str(),
                s.max_ref, s.max_abs, s.rel);
}

} // namespace sof::testing
