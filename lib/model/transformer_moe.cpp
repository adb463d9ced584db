// The transformer driver's mixture-of-experts MLP (a sparse block of qwen3_moe, mixtral, gpt_oss):
// router (+ bias), top-k, dispatch, the experts' grouped products (+ biases) and activation, the
// combine, through the kernel seam (docs/moe.md).
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/bias_grad.h"
#include "kernels/dropout.h"
#include "kernels/grouped_matmul.h"
#include "kernels/matmul.h"
#include "kernels/moe_aux.h"
#include "kernels/moe_dispatch.h"
#include "kernels/moe_router.h"
#include "kernels/residual.h"
#include "kernels/swiglu.h"
#include "kernels/swiglu_clamp.h"
#include "model/transformer_impl.h"

namespace sof::model {

namespace {

kernels::RouterArgs router_args(const BlockSpec& s, int N) {
    kernels::RouterArgs a;
    a.N = N;
    a.E = s.E;
    a.K = s.K;
    a.kind = s.topk_softmax ? kernels::RouterKind::TopkSoftmax : kernels::RouterKind::SoftmaxTopk;
    a.renorm = s.renorm;
    return a;
}

// The experts' activation (N rows of gate_up -> N rows of h) and its backward: SwiGLU over
// [gate | up] halves, or GPT-OSS's clamped SwiGLU over interleaved columns.
template <class T>
void experts_act(const kernels::Exec& ex, const BlockSpec& s, T* h, const T* gu, int N) {
    if (s.moe_clamp)
        kernels::swiglu_clamp_forward<T>(ex, h, gu, N, s.IE, kernels::ClampedSwiglu{});
    else
        kernels::swiglu_forward<T>(ex, h, gu, N, s.IE);
}

template <class T>
void experts_act_backward(const kernels::Exec& ex, const BlockSpec& s, T* dgu, const T* dh,
                          const T* gu, int N) {
    if (s.moe_clamp)
        kernels::swiglu_clamp_backward<T>(ex, dgu, dh, gu, N, s.IE, kernels::ClampedSwiglu{});
    else
        kernels::swiglu_backward<T>(ex, dgu, dh, gu, N, s.IE);
}

// p + off, or null where the model has no such tensor
template <class P> P* opt_at(P* p, size_t off) {
    return off == kNoTensor ? nullptr : p + off;
}

} // namespace

template <class T> kernels::GroupedShape DriverT<T>::moe_shape(int set, int C, int OC) const {
    kernels::GroupedShape g;
    g.E = s_.E;
    g.C = C;
    g.OC = OC;
    g.offsets = i32(Act::MoeOff, set);
    g.host_offsets = moe_host_off_[static_cast<size_t>(set)].data();
    return g;
}

template <class T> void DriverT<T>::moe_forward(const T* p, int l, int set, T* out, bool stats) {
    const int N = B_ * T_, C = s_.C, E = s_.E, K = s_.K, IE = s_.IE, P = N * K;
    const T* x = act(Act::Ln2, set) + r0_ * static_cast<size_t>(C); // decode: rows r0_..
    T* logits = act(Act::MoeLogits, set);
    int* idx = i32(Act::MoeIdx, set);
    float* w = f32(Act::MoeW, set);
    int* order = i32(Act::MoeOrder, set);
    int* slot = i32(Act::MoeSlot, set);
    kernels::matmul_forward<T>(ex_, logits, nullptr, x, p + off_.router,
                               opt_at(p, off_.router_bias), N, C, E);
    kernels::moe_router_forward<T>(ex_, idx, w, logits, router_args(s_, N));
    if (stats) kernels::moe_aux_stats<T>(ex_, f32(Act::MoeStats), logits, idx, nullptr, N, E, K);
    std::vector<int>& hoff = moe_host_off_[static_cast<size_t>(set)];
    kernels::moe_plan(ex_, order, slot, i32(Act::MoeOff, set), hoff.data(), idx, N, K, E);
    T* xs = act(Act::MoeXs, set);
    T* gu = act(Act::MoeGu, set);
    T* h = act(Act::MoeH, set);
    T* ys = act(Act::MoeYs, set);
    kernels::moe_gather<T>(ex_, xs, x, order, N, K, C);
    kernels::grouped_matmul_forward<T>(ex_, gu, xs, p + off_.exp_gate_up,
                                       opt_at(p, off_.exp_gate_up_bias), moe_shape(set, C, 2 * IE));
    experts_act<T>(ex_, s_, h, gu, P);
    kernels::grouped_matmul_forward<T>(ex_, ys, h, p + off_.exp_down, opt_at(p, off_.exp_down_bias),
                                       moe_shape(set, IE, C));
    if (!out) return; // recompute: the block output is already in res
    kernels::moe_combine<T>(ex_, out, ys, w, slot, N, K, C);
    if (resid_drop()) resid_dropout(out, out, l, kernels::DropoutTag::ResidualMlp, 0, N);
    kernels::residual_forward<T>(ex_, out, act(Act::Res2, set) + r0_ * static_cast<size_t>(C), out,
                                 static_cast<long>(N) * C);
}

template <class T> void DriverT<T>::moe_backward(const T* p, float* g, int set, const T* dr) {
    const int N = B_ * T_, C = s_.C, E = s_.E, K = s_.K, IE = s_.IE, P = N * K;
    const T* x = act(Act::Ln2, set);
    const T* logits = act(Act::MoeLogits, set);
    const int* idx = i32(Act::MoeIdx, set);
    const float* w = f32(Act::MoeW, set);
    const int* slot = i32(Act::MoeSlot, set);
    T* dys = act(Act::MoeDys);
    float* dw = f32(Act::MoeDw);
    T* dh = act(Act::MoeDh);
    T* dgu = act(Act::MoeDgu);
    T* dxs = act(Act::MoeDxs);
    T* dlogits = act(Act::MoeDlogits);
    T* dln = act(Act::DLn);
    kernels::moe_combine_backward<T>(ex_, dys, dw, dr, act(Act::MoeYs, set), w, slot, N, K, C);
    kernels::grouped_matmul_backward<T>(ex_, dh, g + off_.exp_down, opt_at(g, off_.exp_down_bias),
                                        dys, act(Act::MoeH, set), p + off_.exp_down,
                                        moe_shape(set, IE, C));
    experts_act_backward<T>(ex_, s_, dgu, dh, act(Act::MoeGu, set), P);
    kernels::grouped_matmul_backward<T>(ex_, dxs, g + off_.exp_gate_up,
                                        opt_at(g, off_.exp_gate_up_bias), dgu, act(Act::MoeXs, set),
                                        p + off_.exp_gate_up, moe_shape(set, C, 2 * IE));
    kernels::moe_gather_backward<T>(ex_, dln, dxs, slot, N, K, C);
    // the load-balancing loss and the z-loss: coef x balance and z coef x z join the loss of
    // this micro-batch, whose mean cross-entropy enters with the scale dloss x N (1 /
    // (accumulation x data-parallel ranks))
    kernels::RouterAuxGrad aux;
    aux.stats = f32(Act::MoeStats);
    const float scale = moe_stats_ ? dloss_ * static_cast<float>(N) : 0.0f;
    aux.d_aux = moe_aux_on_ ? moe_coef_ * scale : 0.0f;
    aux.d_z = moe_z_coef_ * scale;
    kernels::moe_router_backward<T>(ex_, dlogits, dw, logits, idx, router_args(s_, N), &aux);
    // the router's input grad in dys (consumed above), added to the experts' path
    kernels::matmul_backward<T>(ex_, dys, g + off_.router, dlogits, x, p + off_.router, N, C, E);
    if (off_.router_bias != kNoTensor)
        kernels::bias_grad<T>(ex_, g + off_.router_bias, dlogits, N, E);
    kernels::add_inplace<T>(ex_, dln, dys, static_cast<long>(N) * C);
}

template <class T> double DriverT<T>::moe_losses() {
    const size_t n = static_cast<size_t>(kernels::moe_aux_stats_size(s_.E));
    std::vector<float> st(n);
    if (host_mem_) {
        std::copy(f32(Act::MoeStats), f32(Act::MoeStats) + n, st.begin());
    } else {
        dev_->copy(st.data(), f32(Act::MoeStats), n * 4, device::CopyKind::DeviceToHost, *stream_);
        sync();
    }
    const kernels::MoeAuxLosses l = kernels::moe_aux_losses(st.data(), s_.E);
    moe_balance_ = l.balance;
    moe_z_ = l.z;
    return (moe_aux_on_ ? moe_coef_ * l.balance : 0.0) + moe_z_coef_ * l.z;
}

template class DriverT<float>;
template class DriverT<core::bf16>;

} // namespace sof::model
