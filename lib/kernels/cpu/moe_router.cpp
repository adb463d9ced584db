// CPU twin of moe_router.h: per token, the top-k selection (router_prefers), the weights and the
// logits' gradient in fp32, one token per task; the formulas are the reference for the CUDA twin.
#include "kernels/moe_router.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/moe_aux.h"

namespace sof::kernels {

void check_router_args(const RouterArgs& a, const char* op) {
    if (a.E < 1 || a.E > kMaxExperts)
        SOF_FAIL(Usage, "%s: %d experts; the router supports 1 to %d", op, a.E, kMaxExperts);
    if (a.K < 1 || a.K > a.E || a.K > kMaxTopK)
        SOF_FAIL(Usage, "%s: top-k %d with %d experts; k must be in 1..min(experts, %d)", op, a.K,
                 a.E, kMaxTopK);
    if (a.N < 0) SOF_FAIL(Usage, "%s: %d tokens", op, a.N);
}

namespace cpu {

namespace {

// idx[0..K) = the K preferred experts of row v (E), in preference order; taken (E): scratch.
void select_topk(int* idx, const float* v, int E, int K, std::vector<char>& taken) {
    std::fill(taken.begin(), taken.end(), 0);
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            if (taken[static_cast<size_t>(e)]) continue;
            if (best < 0 || router_prefers(v[e], e, v[best], best)) best = e;
        }
        idx[k] = best;
        taken[static_cast<size_t>(best)] = 1;
    }
}

// p (E) = softmax(v); returns logsumexp(v). Sums in index order.
float softmax_row(float* p, const float* v, int E) {
    float m = v[0];
    for (int e = 1; e < E; e++)
        m = std::fmax(m, v[e]);
    float s = 0.0f;
    for (int e = 0; e < E; e++) {
        p[e] = std::exp(v[e] - m);
        s += p[e];
    }
    const float inv = 1.0f / s;
    for (int e = 0; e < E; e++)
        p[e] *= inv;
    return m + std::log(s);
}

} // namespace

void moe_router_forward(int* idx, float* w, const float* logits, const RouterArgs& a) {
#pragma omp parallel
    {
        std::vector<float> p(static_cast<size_t>(a.E));
        std::vector<char> taken(static_cast<size_t>(a.E));
#pragma omp for schedule(static)
        for (int n = 0; n < a.N; n++) {
            const float* v = logits + static_cast<size_t>(n) * a.E;
            int* ix = idx + static_cast<size_t>(n) * a.K;
            float* wn = w + static_cast<size_t>(n) * a.K;
            select_topk(ix, v, a.E, a.K, taken);
            if (a.kind == RouterKind::SoftmaxTopk) {
                softmax_row(p.data(), v, a.E);
                float s = 0.0f;
                for (int k = 0; k < a.K; k++) {
                    wn[k] = p[static_cast<size_t>(ix[k])];
                    s += wn[k];
                }
                if (a.renorm)
                    for (int k = 0; k < a.K; k++)
                        wn[k] /= s;
            } else { // softmax over the k selected logits; the first is their maximum
                const float m = v[ix[0]];
                float s = 0.0f;
                for (int k = 0; k < a.K; k++) {
                    wn[k] = std::exp(v[ix[k]] - m);
                    s += wn[k];
                }
                for (int k = 0; k < a.K; k++)
                    wn[k] /= s;
            }
        }
    }
}

void moe_router_backward(float* dlogits, const float* dw, const float* logits, const int* idx,
                         const RouterArgs& a, const RouterAuxGrad* aux) {
    const int E = a.E, K = a.K;
    const bool use_aux = aux && (aux->d_aux != 0.0f || aux->d_z != 0.0f);
    SOF_CHECK(!use_aux || aux->stats, "moe_router_backward: aux terms without their stats");
    float aux_scale = 0.0f, z_scale = 0.0f; // d(balance)/dp per count, d(z)/dlogit per lse*p
    if (use_aux) {
        const float M = aux->stats[2 * E];
        SOF_CHECK(M > 0.0f, "moe_router_backward: the aux stats count no token");
        aux_scale = aux->d_aux * static_cast<float>(E) / (M * M);
        z_scale = aux->d_z * 2.0f / M;
    }
    const bool full_softmax = a.kind == RouterKind::SoftmaxTopk || use_aux;
#pragma omp parallel
    {
        std::vector<float> p(static_cast<size_t>(E)), g(static_cast<size_t>(E));
#pragma omp for schedule(static)
        for (int n = 0; n < a.N; n++) {
            const float* v = logits + static_cast<size_t>(n) * E;
            const int* ix = idx + static_cast<size_t>(n) * K;
            const float* dwn = dw ? dw + static_cast<size_t>(n) * K : nullptr;
            float* d = dlogits + static_cast<size_t>(n) * E;
            float lse = 0.0f;
            if (full_softmax) lse = softmax_row(p.data(), v, E);
            for (int e = 0; e < E; e++)
                g[static_cast<size_t>(e)] = 0.0f;
            // g = d(loss)/dp of the terms that go through the full softmax
            if (dwn && a.kind == RouterKind::SoftmaxTopk) {
                if (a.renorm) {
                    float S = 0.0f;
                    for (int k = 0; k < K; k++)
                        S += p[static_cast<size_t>(ix[k])];
                    float c = 0.0f;
                    for (int k = 0; k < K; k++)
                        c += dwn[k] * (p[static_cast<size_t>(ix[k])] / S);
                    for (int k = 0; k < K; k++)
                        g[static_cast<size_t>(ix[k])] += (dwn[k] - c) / S;
                } else {
                    for (int k = 0; k < K; k++)
                        g[static_cast<size_t>(ix[k])] += dwn[k];
                }
            }
            const float mn = use_aux ? (aux->mask ? aux->mask[n] : 1.0f) : 0.0f;
            if (use_aux && aux_scale != 0.0f)
                for (int e = 0; e < E; e++)
                    g[static_cast<size_t>(e)] += aux_scale * mn * aux->stats[E + e];
            float pg = 0.0f;
            if (full_softmax)
                for (int e = 0; e < E; e++)
                    pg += p[static_cast<size_t>(e)] * g[static_cast<size_t>(e)];
            const float zc = z_scale * mn * lse;
            for (int e = 0; e < E; e++)
                d[e] = full_softmax
                           ? p[static_cast<size_t>(e)] * (g[static_cast<size_t>(e)] - pg + zc)
                           : 0.0f;
            if (dwn && a.kind == RouterKind::TopkSoftmax) {
                // w = softmax of the k selected logits: dv_j = w_j (dw_j - sum_k w_k dw_k)
                const float m = v[ix[0]];
                float s = 0.0f;
                for (int k = 0; k < K; k++)
                    s += std::exp(v[ix[k]] - m);
                float c = 0.0f;
                for (int k = 0; k < K; k++)
                    c += dwn[k] * (std::exp(v[ix[k]] - m) / s);
                for (int k = 0; k < K; k++)
                    d[ix[k]] += std::exp(v[ix[k]] - m) / s * (dwn[k] - c);
            }
        }
    }
}

} // namespace cpu

} // namespace sof::kernels
