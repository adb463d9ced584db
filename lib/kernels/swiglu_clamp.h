// GPT-OSS's expert activation: gate clamped above at limit, up clamped to [-limit, limit],
// h = (up + 1) * gate * sigmoid(alpha * gate), and its backward. Elementwise, fp32 math.
#pragma once

#include <cmath>

#include "kernels/exec.h"

namespace sof::kernels {

// transformers' GptOssExperts._apply_gate: config swiglu_alpha (1.702) and swiglu_limit (7.0);
// interleaved: gate = the even columns, up = the odd ones of each (2I) row (GPT-OSS's fused
// gate_up_proj), else [gate | up] halves. The clamps pass the gradient where torch's clamp does:
// gate < limit, -limit < up < limit (strictly inside: zero at the bounds, as torch 2.15 gives
// it, beyond them and for NaN).
struct ClampedSwiglu {
    float alpha = 1.702f;
    float limit = 7.0f;
    bool interleaved = true;
};

namespace cpu {
// h (N,I) from gu (N,2I).
void swiglu_clamp_forward(float* h, const float* gu, int N, int I, const ClampedSwiglu& a);
// dgu (N,2I) from dh (N,I) and the forward input gu (overwritten).
void swiglu_clamp_backward(float* dgu, const float* dh, const float* gu, int N, int I,
                           const ClampedSwiglu& a);
} // namespace cpu

namespace cuda {
template <class T>
void swiglu_clamp_forward(T* h, const T* gu, int N, int I, const ClampedSwiglu& a, void* stream);
template <class T>
void swiglu_clamp_backward(T* dgu, const T* dh, const T* gu, int N, int I, const ClampedSwiglu& a,
                           void* stream);
} // namespace cuda

// The element formulas of both twins (fp32): the column of gate i and of up i in a (2I) row, h of
// one (gate, up) pair, and its two derivatives (dg, du) for an upstream d.
SOF_HD int clamped_gate_col(int i, int /*I*/, bool interleaved) {
    return interleaved ? 2 * i : i;
}
SOF_HD int clamped_up_col(int i, int I, bool interleaved) {
    return interleaved ? 2 * i + 1 : I + i;
}
SOF_HD float clamped_sigmoid(float x) {
#if defined(__CUDA_ARCH__)
    return 1.0f / (1.0f + expf(-x));
#else
    return 1.0f / (1.0f + std::exp(-x));
#endif
}
SOF_HD float clamped_swiglu(float g, float u, const ClampedSwiglu& a) {
    const float gc = g > a.limit ? a.limit : g; // NaN stays NaN (torch's clamp)
    const float uc = u > a.limit ? a.limit : (u < -a.limit ? -a.limit : u);
    return (uc + 1.0f) * (gc * clamped_sigmoid(a.alpha * gc));
}
SOF_HD void clamped_swiglu_grad(float g, float u, float d, const ClampedSwiglu& a, float* dg,
                                float* du) {
    const float gc = g > a.limit ? a.limit : g;
    const float uc = u > a.limit ? a.limit : (u < -a.limit ? -a.limit : u);
    const float s = clamped_sigmoid(a.alpha * gc);
    const bool g_in = g<a.limit, u_in = u> - a.limit && u < a.limit;
    *dg = g_in ? d * (uc + 1.0f) * (s + gc * a.alpha * s * (1.0f - s)) : 0.0f;
    *du = u_in ? d * (gc * s) : 0.0f;
}

template <class T>
void swiglu_clamp_forward(const Exec& ex, T* h, const T* gu, int N, int I,
                          const ClampedSwiglu& a = {}) {
    SOF_KERNEL_DISPATCH(ex, T, "swiglu_clamp_forward", (cpu::swiglu_clamp_forward(h, gu, N, I, a)),
                        (cuda::swiglu_clamp_forward(h, gu, N, I, a, ex.stream)));
}

template <class T>
void swiglu_clamp_backward(const Exec& ex, T* dgu, const T* dh, const T* gu, int N, int I,
                           const ClampedSwiglu& a = {}) {
    SOF_KERNEL_DISPATCH(ex, T, "swiglu_clamp_backward",
                        (cpu::swiglu_clamp_backward(dgu, dh, gu, N, I, a)),
                        (cuda::swiglu_clamp_backward(dgu, dh, gu, N, I, a, ex.stream)));
}

} // namespace sof::kernels
