// CPU twin of attention.h, row by row: a query row's scores live in a per-thread row buffer
// (O(T) per thread, never T x T); the backward recomputes the probabilities from the saved lse.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace sof::kernels::cpu {

namespace {

// First key position query t of batch row b may see (segments: its document's start).
inline int first_key(const AttnArgs<float>& a, int b, int t) {
    if (!a.segments) return 0;
    const int* seg = a.segments + static_cast<size_t>(b) * a.T;
    int t0 = t;
    while (t0 > 0 && seg[t0 - 1] == seg[t])
        t0--;
    return t0;
}

} // namespace

void attention_forward(float* out, float* lse, const AttnArgs<float>& a) {
    const int B = a.B, T = a.T, NH = a.num_heads, hs = a.head_dim;
    const int group = a.num_heads / a.num_kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
    {
        std::vector<float> row(static_cast<size_t>(T));
#pragma omp for collapse(3) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    const size_t bt = static_cast<size_t>(b) * T;
                    const int kh = h / group, t0 = first_key(a, b, t);
                    const float* q = a.q + (bt + t) * a.ldq + static_cast<size_t>(h) * hs;
                    float maxv = -INFINITY;
                    for (int t2 = t0; t2 <= t; t2++) {
                        const float* k = a.k + (bt + t2) * a.ldk + static_cast<size_t>(kh) * hs;
                        float dot = 0.0f;
                        for (int i = 0; i < hs; i++)
                            dot += q[i] * k[i];
                        dot *= scale;
                        row[static_cast<size_t>(t2)] = dot;
                        maxv = std::max(maxv, dot);
                    }
                    float sum = 0.0f;
                    for (int t2 = t0; t2 <= t; t2++) {
                        const float e = std::exp(row[static_cast<size_t>(t2)] - maxv);
                        row[static_cast<size_t>(t2)] = e;
                        sum += e;
                    }
                    const float inv = 1.0f / sum;
                    float* o = out + (bt + t) * a.ldo + static_cast<size_t>(h) * hs;
                    for (int i = 0; i < hs; i++)
                        o[i] = 0.0f;
                    for (int t2 = t0; t2 <= t; t2++) {
                        const float* vv = a.v + (bt + t2) * a.ldv + static_cast<size_t>(kh) * hs;
                        const float p = row[static_cast<size_t>(t2)] * inv;
                        for (int i = 0; i < hs; i++)
                            o[i] += p * vv[i];
                    }
                    lse[(static_cast<size_t>(b) * NH + h) * T + t] = maxv + std::log(sum);
                }
            }
        }
    }
}

// Parallel over (b, kv head): the query heads sharing a kv head add into its dk/dv one after the
// other in head order, so the sums never depend on the threads.
void attention_backward(const AttnGrads<float>& d, const float* dout, const float* out,
                        const float* lse, float* delta, const AttnArgs<float>& a) {
    const int B = a.B, T = a.T, NH = a.num_heads, NKV = a.num_kv_heads, hs = a.head_dim;
    const int group = NH / NKV;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const size_t row = (static_cast<size_t>(b) * T + t);
                const float* dd = dout + row * a.ldo + static_cast<size_t>(h) * hs;
                const float* o = out + row * a.ldo + static_cast<size_t>(h) * hs;
                float s = 0.0f;
                for (int i = 0; i < hs; i++)
                    s += dd[i] * o[i];
                delta[(static_cast<size_t>(b) * NH + h) * T + t] = s;
            }
        }
    }
#pragma omp parallel
    {
        std::vector<float> p(static_cast<size_t>(T)), dp(static_cast<size_t>(T));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int kh = 0; kh < NKV; kh++) {
                const size_t bt = static_cast<size_t>(b) * T;
                for (int t = 0; t < T; t++) {
                    for (int h = kh * group; h < (kh + 1) * group; h++)
                        std::memset(d.q + (bt + t) * d.ldq + static_cast<size_t>(h) * hs, 0,
                                    sizeof(float) * hs);
                    std::memset(d.k + (bt + t) * d.ldk + static_cast<size_t>(kh) * hs, 0,
                                sizeof(float) * hs);
                    std::memset(d.v + (bt + t) * d.ldv + static_cast<size_t>(kh) * hs, 0,
                                sizeof(float) * hs);
                }
                for (int h = kh * group; h < (kh + 1) * group; h++) {
                    for (int t = 0; t < T; t++) {
                        const size_t r = (static_cast<size_t>(b) * NH + h) * T + t;
                        const float L = lse[r], D = delta[r];
                        const int t0 = first_key(a, b, t);
                        const float* q = a.q + (bt + t) * a.ldq + static_cast<size_t>(h) * hs;
                        const float* dd = dout + (bt + t) * a.ldo + static_cast<size_t>(h) * hs;
                        float* dq = d.q + (bt + t) * d.ldq + static_cast<size_t>(h) * hs;
                        for (int t2 = t0; t2 <= t; t2++) {
                            const float* k = a.k + (bt + t2) * a.ldk + static_cast<size_t>(kh) * hs;
                            const float* vv =
                                a.v + (bt + t2) * a.ldv + static_cast<size_t>(kh) * hs;
                            float dot = 0.0f, dv_dot = 0.0f;
                            for (int i = 0; i < hs; i++) {
                                dot += q[i] * k[i];
                                dv_dot += dd[i] * vv[i];
                            }
                            p[static_cast<size_t>(t2)] = std::exp(dot * scale - L);
                            dp[static_cast<size_t>(t2)] = dv_dot;
                        }
                        for (int t2 = t0; t2 <= t; t2++) {
                            const float pr = p[static_cast<size_t>(t2)];
                            const float ds = pr * (dp[static_cast<size_t>(t2)] - D) * scale;
                            const float* k = a.k + (bt + t2) * a.ldk + static_cast<size_t>(kh) * hs;
                            float* dk = d.k + (bt + t2) * d.ldk + static_cast<size_t>(kh) * hs;
                            float* dv = d.v + (bt + t2) * d.ldv + static_cast<size_t>(kh) * hs;
                            for (int i = 0; i < hs; i++) {
                                dq[i] += ds * k[i];
                                dk[i] += ds * q[i];
                                dv[i] += pr * dd[i];
                            }
                        }
                    }
                }
            }
        }
    }
}

} // namespace sof::kernels::cpu
