// CPU kernels shared by the architectures (GPT-2 math of llm.c's train_gpt2.c; GQA attention).
// Parallel loops split only independent outputs; sums over rows run serially per output element.
#include "model/kernels_cpu.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace sof::model::cpu {

namespace {
constexpr float kLnEps = 1e-5f;
constexpr int kChanBlock = 64; // channels per task in the column-sum loops (dw, db, dwte)
constexpr int kTileM = 64,
              kTileN = 256; // sgemm output tile (fixed: results must not depend on threads)
} // namespace

void use_single_threaded_blas() {
    openblas_set_num_threads(1);
}

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* o = out + (static_cast<size_t>(b) * T + t) * C;
            const float* we = wte + static_cast<size_t>(inp[b * T + t]) * C;
            const float* pe = wpe + static_cast<size_t>(t) * C;
            for (int i = 0; i < C; i++)
                o[i] = we[i] + pe[i];
        }
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C) {
    const int nblk = (C + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float* d = dout + (static_cast<size_t>(b) * T + t) * C;
                float* we = dwte + static_cast<size_t>(inp[b * T + t]) * C;
                float* pe = dwpe + static_cast<size_t>(t) * C;
                for (int i = c0; i < c1; i++) {
                    we[i] += d[i];
                    pe[i] += d[i];
                }
            }
        }
    }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + static_cast<size_t>(n) * C;
        double s = 0.0;
        for (int i = 0; i < C; i++)
            s += x[i];
        const float m = static_cast<float>(s / C);
        double v = 0.0;
        for (int i = 0; i < C; i++) {
            const float d = x[i] - m;
            v += static_cast<double>(d) * d;
        }
        const float r = 1.0f / std::sqrt(static_cast<float>(v / C) + kLnEps);
        float* o = out + static_cast<size_t>(n) * C;
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * r * w[i] + b[i];
        mean[n] = m;
        rstd[n] = r;
    }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + static_cast<size_t>(n) * C;
        const float* d = dout + static_cast<size_t>(n) * C;
        const float m = mean[n], r = rstd[n];
        double s1 = 0.0, s2 = 0.0;
        for (int i = 0; i < C; i++) {
            const float norm = (x[i] - m) * r;
            const float dnorm = w[i] * d[i];
            s1 += dnorm;
            s2 += static_cast<double>(dnorm) * norm;
        }
        const float dnorm_mean = static_cast<float>(s1 / C);
        const float dnorm_norm_mean = static_cast<float>(s2 / C);
        float* di = dinp + static_cast<size_t>(n) * C;
        for (int i = 0; i < C; i++) {
            const float norm = (x[i] - m) * r;
            const float dnorm = w[i] * d[i];
            di[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
        }
    }
    const int nblk = (C + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
        for (int n = 0; n < N; n++) {
            const float* x = inp + static_cast<size_t>(n) * C;
            const float* d = dout + static_cast<size_t>(n) * C;
            const float m = mean[n], r = rstd[n];
            for (int i = c0; i < c1; i++) {
                dw[i] += (x[i] - m) * r * d[i];
                db[i] += d[i];
            }
        }
    }
}

namespace {

// C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta * C, row-major, as independent sgemm calls on
// fixed kTileM x kTileN tiles of C spread over OpenMP threads (OpenBLAS itself runs one thread,
// see use_single_threaded_blas). Every element of C comes from a call of the same shape whatever
// the thread count, and K is never split, so the result is bitwise independent of the threads.
void gemm_tiled(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
    const int mt = (M + kTileM - 1) / kTileM, nt = (N + kTileN - 1) / kTileN;
#pragma omp parallel for collapse(2) schedule(static)
    for (int i = 0; i < mt; i++) {
        for (int j = 0; j < nt; j++) {
            const int r0 = i * kTileM, rows = std::min(M, r0 + kTileM) - r0;
            const int c0 = j * kTileN, cols = std::min(N, c0 + kTileN) - c0;
            const float* a = trans_a ? A + r0 : A + static_cast<size_t>(r0) * lda;
            const float* b = trans_b ? B + static_cast<size_t>(c0) * ldb : B + c0;
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                        trans_b ? CblasTrans : CblasNoTrans, rows, cols, K, 1.0f, a, lda, b, ldb,
                        beta, C + static_cast<size_t>(r0) * ldc + c0, ldc);
        }
    }
}

} // namespace

void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N, int C,
                    int OC) {
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            std::memcpy(out + static_cast<size_t>(n) * OC, bias, sizeof(float) * OC);
    }
    gemm_tiled(false, true, N, OC, C, inp, C, w, C, bias ? 1.0f : 0.0f, out, OC);
}

void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                     const float* w, int N, int C, int OC) {
    if (dinp) // (N,C) = dout (N,OC) @ w (OC,C)
        gemm_tiled(false, false, N, C, OC, dout, OC, w, C, 0.0f, dinp, C);
    // dw (OC,C) += dout^T (OC,N) @ inp (N,C)
    gemm_tiled(true, false, OC, C, N, dout, OC, inp, C, 1.0f, dw, C);
    if (dbias) {
        const int nblk = (OC + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const int c0 = blk * kChanBlock, c1 = std::min(OC, c0 + kChanBlock);
            for (int n = 0; n < N; n++) {
                const float* d = dout + static_cast<size_t>(n) * OC;
                for (int i = c0; i < c1; i++)
                    dbias[i] += d[i];
            }
        }
    }
}

void attention_forward(float* out, float* att, const AttnView& v, int B, int T) {
    const int NH = v.num_heads, hs = v.head_dim, group = v.num_heads / v.num_kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const size_t bt = static_cast<size_t>(b) * T;
                const int kh = h / group;
                const float* q = v.q + (bt + t) * v.ldq + h * hs;
                float* row = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = v.k + (bt + t2) * v.ldk + kh * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++)
                        dot += q[i] * k[i];
                    dot *= scale;
                    row[t2] = dot;
                    maxv = std::max(maxv, dot);
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float e = std::exp(row[t2] - maxv);
                    row[t2] = e;
                    sum += e;
                }
                const float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++)
                    row[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++)
                    row[t2] = 0.0f;
                float* o = out + (bt + t) * v.ldo + h * hs;
                for (int i = 0; i < hs; i++)
                    o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* vv = v.v + (bt + t2) * v.ldv + kh * hs;
                    const float a = row[t2];
                    for (int i = 0; i < hs; i++)
                        o[i] += a * vv[i];
                }
            }
        }
    }
}

// Parallel over (b, kv head): the query heads sharing a kv head add into its dk/dv one after the
// other in head order, so the sums never depend on the threads.
void attention_backward(const AttnGrad& d, const float* dout, const AttnView& v, const float* att,
                        int B, int T) {
    const int NH = v.num_heads, NKV = v.num_kv_heads, hs = v.head_dim, group = NH / NKV;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    float* dqb = d.q;
    float* dkb = d.k;
    float* dvb = d.v;
#pragma omp parallel
    {
        std::vector<float> datt(static_cast<size_t>(T));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int kh = 0; kh < NKV; kh++) {
                const size_t bt = static_cast<size_t>(b) * T;
                for (int t = 0; t < T; t++) {
                    for (int h = kh * group; h < (kh + 1) * group; h++)
                        std::memset(dqb + (bt + t) * d.ldq + h * hs, 0, sizeof(float) * hs);
                    std::memset(dkb + (bt + t) * d.ldk + kh * hs, 0, sizeof(float) * hs);
                    std::memset(dvb + (bt + t) * d.ldv + kh * hs, 0, sizeof(float) * hs);
                }
                for (int h = kh * group; h < (kh + 1) * group; h++) {
                    for (int t = 0; t < T; t++) {
                        const float* row = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
                        const float* dd = dout + (bt + t) * v.ldo + h * hs;
                        const float* q = v.q + (bt + t) * v.ldq + h * hs;
                        float* dq = dqb + (bt + t) * d.ldq + h * hs;
                        // through out = att @ v
                        for (int t2 = 0; t2 <= t; t2++) {
                            const float* vv = v.v + (bt + t2) * v.ldv + kh * hs;
                            float* dv = dvb + (bt + t2) * d.ldv + kh * hs;
                            float dot = 0.0f;
                            for (int i = 0; i < hs; i++) {
                                dot += vv[i] * dd[i];
                                dv[i] += row[t2] * dd[i];
                            }
                            datt[static_cast<size_t>(t2)] = dot;
                        }
                        // through the softmax: dpre = att * (datt - sum(att * datt))
                        float s = 0.0f;
                        for (int t2 = 0; t2 <= t; t2++)
                            s += row[t2] * datt[static_cast<size_t>(t2)];
                        // through pre = q k^T * scale
                        for (int t2 = 0; t2 <= t; t2++) {
                            const float dpre =
                                row[t2] * (datt[static_cast<size_t>(t2)] - s) * scale;
                            const float* k = v.k + (bt + t2) * v.ldk + kh * hs;
                            float* dk = dkb + (bt + t2) * d.ldk + kh * hs;
                            for (int i = 0; i < hs; i++) {
                                dq[i] += dpre * k[i];
                                dk[i] += dpre * q[i];
                            }
                        }
                    }
                }
            }
        }
    }
}

namespace {
AttnView fused_qkv_view(const float* qkv, int C, int NH) {
    const size_t C3 = static_cast<size_t>(3) * C;
    return AttnView{qkv, qkv + C, qkv + 2 * static_cast<size_t>(C), C3,
                    C3,  C3,      static_cast<size_t>(C),           NH,
                    NH,  C / NH};
}
} // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    attention_forward(out, att, fused_qkv_view(qkv, C, NH), B, T);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH) {
    const size_t C3 = static_cast<size_t>(3) * C;
    const AttnGrad d{dqkv, dqkv + C, dqkv + 2 * static_cast<size_t>(C), C3, C3, C3};
    attention_backward(d, dout, fused_qkv_view(qkv, C, NH), att, B, T);
}

namespace {
constexpr float kGeluScale = 0.7978845608028654f; // sqrt(2/pi)
} // namespace

void gelu_forward(float* out, const float* inp, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
        const float x = inp[i];
        const float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
    }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
        const float x = inp[i];
        const float cube = 0.044715f * x * x * x;
        const float th = std::tanh(kGeluScale * (x + cube));
        const float sech2 = 1.0f - th * th;
        const float local =
            0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

void residual_forward(float* out, const float* a, const float* b, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++)
        out[i] = a[i] + b[i];
}

void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                  const int* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* lg = logits + static_cast<size_t>(n) * Vp;
        float* p = probs + static_cast<size_t>(n) * Vp;
        float maxv = -INFINITY;
        for (int i = 0; i < V; i++)
            maxv = std::max(maxv, lg[i]);
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            const float e = std::exp(lg[i] - maxv);
            p[i] = e;
            sum += e;
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int i = 0; i < V; i++)
            p[i] *= inv;
        for (int i = V; i < Vp; i++)
            p[i] = 0.0f;
        // log-sum-exp form: exact even where the probability underflows. Target -1: an ignored
        // (masked) position, loss 0 (issue 19; keep when porting to lib/kernels/)
        if (targets)
            losses[n] = targets[n] == -1
                            ? 0.0f
                            : static_cast<float>(std::log(sum) - (lg[targets[n]] - maxv));
    }
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets,
                                   float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* p = probs + static_cast<size_t>(n) * Vp;
        float* d = dlogits + static_cast<size_t>(n) * Vp;
        const int tgt = targets[n];
        if (tgt == -1) { // an ignored (masked) position: no gradient (issue 19; keep when porting)
            std::fill(d, d + Vp, 0.0f);
            continue;
        }
        for (int i = 0; i < V; i++)
            d[i] = (p[i] - (i == tgt ? 1.0f : 0.0f)) * dloss;
        for (int i = V; i < Vp; i++)
            d[i] = 0.0f;
    }
}

} // namespace sof::model::cpu
