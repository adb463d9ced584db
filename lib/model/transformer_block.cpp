// The transformer driver's blocks: forward and backward of one block (norm, q|k|v, qk-norm, RoPE,
// attention with the Ulysses exchange, output projection, norm, MLP) through the kernel seam.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "device/device.h"
#include "kernels/attention.h"
#include "kernels/bias_grad.h"
#include "kernels/cast.h"
#include "kernels/copy.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/transformer_impl.h"

namespace sof::model {

template <class T>
void DriverT<T>::norm_forward(T* out, float* mean, float* rstd, const T* in, const T* w, const T* b,
                              int n) {
    const int N = n < 0 ? B_ * T_ : n, C = s_.C;
    if (s_.norm == NormKind::LayerNorm)
        kernels::layernorm_forward<T>(ex_, out, mean, rstd, in, w, b, N, C);
    else
        kernels::rmsnorm_forward<T>(ex_, out, rstd, in, w, N, 1, C, static_cast<size_t>(C),
                                    s_.norm_eps);
}

// dinp += the input grad of the norm; gw, gb += its weight and bias grads.
template <class T>
void DriverT<T>::norm_backward(T* dinp, float* gw, float* gb, const T* dout, const T* in,
                               const T* w, const float* mean, const float* rstd, int n) {
    const int N = n < 0 ? B_ * T_ : n, C = s_.C;
    if (s_.norm == NormKind::LayerNorm)
        kernels::layernorm_backward<T>(ex_, dinp, gw, gb, dout, in, w, mean, rstd, N, C);
    else
        kernels::rmsnorm_backward<T>(ex_, dinp, true, gw, dout, in, w, rstd, N, 1, C,
                                     static_cast<size_t>(C));
}

// The Ulysses all-to-alls on the activation buffers themselves (device memory, fp32 or bf16),
// ordered on the model's stream (sp::Ulysses over rank::DeviceComm).
template <class T> void DriverT<T>::to_heads(const T* in, T* out, int K, int X) {
    seq_->to_heads(in, out, ptr(Act::XRecv, -1), sizeof(T), B_, T_, K, X);
}

template <class T> void DriverT<T>::to_tokens(const T* in, T* out, int K, int X) {
    seq_->to_tokens(in, out, ptr(Act::XRecv, -1), sizeof(T), B_, T_, K, X);
}

// Block l's sinks as fp32 logits: the parameter itself (fp32 weights), or its bf16 working copy
// widened into Act::Sinks (NH floats; the op reads fp32).
template <class T> const float* DriverT<T>::sinks_f32(const T* p) {
    if (off_.sinks == kNoTensor) return nullptr;
    if constexpr (std::is_same_v<T, float>) {
        return p + off_.sinks;
    } else {
        float* s = f32(Act::Sinks);
        kernels::cast_bf16_to_f32(ex_, reinterpret_cast<const uint16_t*>(p + off_.sinks), s,
                                  static_cast<size_t>(s_.NH));
        return s;
    }
}

// The attention of block l over `heads` query heads starting at global head `head0` (Ulysses:
// this rank's heads), its window, sinks and dropout (the key numbers probabilities by global
// batch row, head and position: the same bits at any rank count and sp).
template <class T>
kernels::AttnArgs<T> DriverT<T>::attn_args(int l, const T* q, const T* k, const T* v, size_t ldq,
                                           size_t ldkv, size_t ldo, int T_, int heads, int kv_heads,
                                           int head0, int q_begin) {
    kernels::AttnArgs<T> a{q,  k,     v,        ldq,   ldkv,       ldkv,    ldo,         B_,
                           T_, heads, kv_heads, s_.hd, segments(), q_begin, attn_kernel_};
    a.window = s_.window[static_cast<size_t>(l)];
    if (drop_on_ && attn_p_ > 0.0f) {
        a.dropout = attn_p_;
        kernels::DropoutKey& key = a.dropout_key;
        key.seed = drop_.seed;
        key.step = drop_.step;
        key.layer = static_cast<uint32_t>(l);
        key.tag = kernels::DropoutTag::AttnProbs;
        key.batch0 = drop_.batch0;
        key.head0 = head0;
        key.heads = s_.NH;
    }
    return a;
}

// Residual dropout of rows [r0, r0+n) of this rank's B*T rows, split at sequence boundaries:
// each piece is (1, len, C) at global batch row batch0 + b and global position token0 + t.
template <class T>
void DriverT<T>::resid_dropout(T* out, const T* x, int l, kernels::DropoutTag tag, int r0, int n) {
    const int Tl = T_, C = s_.C;
    for (int r = r0; r < r0 + n;) {
        const int b = r / Tl, t = r % Tl, len = std::min(Tl - t, r0 + n - r);
        kernels::DropoutArgs d{1, len, C, resid_p_, {}};
        d.key.seed = drop_.seed;
        d.key.step = drop_.step;
        d.key.layer = static_cast<uint32_t>(l);
        d.key.tag = tag;
        d.key.batch0 = drop_.batch0 + static_cast<uint64_t>(b);
        d.key.token0 = sp_index_ * Tl + t;
        d.key.tokens = P_ * Tl;
        const size_t off = static_cast<size_t>(r - r0) * C;
        kernels::dropout_forward<T>(ex_, out + off, x + off, d);
        r += len;
    }
}

// Causal attention of one block over qkv (B,T,W): on the local tokens (P = 1) or, with Ulysses,
// all-to-all to [P*T tokens, NH/P heads], attention there, and back to [T tokens, all heads].
template <class T> void DriverT<T>::attention_forward(const T* p, int l, int set) {
    const int Q = s_.Q, KV = s_.KV, W = s_.W, N = B_ * T_;
    const T* qkv = act(Act::Qkv, set);
    const float* sinks = sinks_f32(p);
    if (P_ == 1) { // decode: the new rows r0_.. against every key before them (the cache)
        const size_t w = static_cast<size_t>(W);
        const int r0 = static_cast<int>(r0_);
        kernels::AttnArgs<T> a = attn_args(l, qkv, qkv + Q, qkv + Q + KV, w, w,
                                           static_cast<size_t>(Q), r0 + T_, s_.NH, s_.NKV, 0, r0);
        a.sinks = sinks;
        kernels::attention_forward<T>(ex_, act(Act::Atty, set), f32(Act::Lse, set), a);
        return;
    }
    const int Xq = Q / P_, Xkv = KV / P_, NHl = s_.NH / P_;
    T* qloc = act(Act::QLoc);
    T* kvloc = act(Act::KvLoc);
    kernels::copy_rows<T>(ex_, qloc, Q, qkv, W, N, Q);
    kernels::copy_rows<T>(ex_, kvloc, 2 * KV, qkv + Q, W, N, 2 * KV);
    T* qh = act(Act::Qh, set);
    T* kvh = act(Act::Kvh, set);
    to_heads(qloc, qh, 1, Xq);
    to_heads(kvloc, kvh, 2, Xkv);
    const size_t xq = static_cast<size_t>(Xq), xkv2 = static_cast<size_t>(2 * Xkv);
    kernels::AttnArgs<T> a = attn_args(l, qh, kvh, kvh + Xkv, xq, xkv2, xq, P_ * T_, NHl,
                                       s_.NKV / P_, sp_index_ * NHl, 0);
    a.sinks = sinks ? sinks + sp_index_ * NHl : nullptr; // this rank's heads
    kernels::attention_forward<T>(ex_, act(Act::Attyh, set), f32(Act::Lse, set), a);
    to_tokens(act(Act::Attyh, set), act(Act::Atty, set), 1, Xq);
}

// DAtty -> DQkv (grads of the post-RoPE q, k and of v); the sinks' grads added into g.
template <class T> void DriverT<T>::attention_backward(const T* p, float* g, int l, int set) {
    const int Q = s_.Q, KV = s_.KV, W = s_.W, N = B_ * T_;
    const T* qkv = act(Act::Qkv, set);
    T* dqkv = act(Act::DQkv);
    const float* sinks = sinks_f32(p);
    float* dsinks = off_.sinks == kNoTensor ? nullptr : g + off_.sinks;
    if (P_ == 1) {
        const size_t w = static_cast<size_t>(W);
        kernels::AttnArgs<T> a = attn_args(l, qkv, qkv + Q, qkv + Q + KV, w, w,
                                           static_cast<size_t>(Q), T_, s_.NH, s_.NKV, 0, 0);
        a.sinks = sinks;
        kernels::AttnGrads<T> d{dqkv, dqkv + Q, dqkv + Q + KV, w, w, w};
        d.dsinks = dsinks;
        kernels::attention_backward<T>(ex_, d, act(Act::DAtty), act(Act::Atty, set),
                                       f32(Act::Lse, set), f32(Act::Delta), a);
        return;
    }
    const int Xq = Q / P_, Xkv = KV / P_, NHl = s_.NH / P_;
    T* dattyh = act(Act::DAttyh);
    T* dqh = act(Act::DQh);
    T* dkvh = act(Act::DKvh);
    to_heads(act(Act::DAtty), dattyh, 1, Xq);
    const T* qh = act(Act::Qh, set);
    const T* kvh = act(Act::Kvh, set);
    const size_t xq = static_cast<size_t>(Xq), xkv2 = static_cast<size_t>(2 * Xkv);
    kernels::AttnArgs<T> a = attn_args(l, qh, kvh, kvh + Xkv, xq, xkv2, xq, P_ * T_, NHl,
                                       s_.NKV / P_, sp_index_ * NHl, 0);
    a.sinks = sinks ? sinks + sp_index_ * NHl : nullptr;
    kernels::AttnGrads<T> d{dqh, dkvh, dkvh + Xkv, xq, xkv2, xkv2};
    d.dsinks = dsinks ? dsinks + sp_index_ * NHl : nullptr; // the other heads' ranks add theirs
    kernels::attention_backward<T>(ex_, d, dattyh, act(Act::Attyh, set), f32(Act::Lse, set),
                                   f32(Act::Delta), a);
    T* qloc = act(Act::QLoc);
    T* kvloc = act(Act::KvLoc);
    to_tokens(dqh, qloc, 1, Xq);
    to_tokens(dkvh, kvloc, 2, Xkv);
    kernels::copy_rows<T>(ex_, dqkv, W, qloc, Q, N, Q);
    kernels::copy_rows<T>(ex_, dqkv + Q, W, kvloc, 2 * KV, N, 2 * KV);
}

template <class T>
void DriverT<T>::block_forward(const T* p, int l, int set, const T* in, T* out, bool output) {
    const int N = B_ * T_, C = s_.C, Q = s_.Q, KV = s_.KV, W = s_.W;
    const long NC = static_cast<long>(N) * C;
    const bool ln = s_.norm == NormKind::LayerNorm;
    const size_t w = static_cast<size_t>(W);
    auto opt = [p](size_t o) { return o == kNoTensor ? nullptr : p + o; };
    // rows r0_.. of a per-block buffer of `width` elements per row (r0_ = 0 but in decode)
    auto rows = [this, set](Act id, size_t width) { return act(id, set) + r0_ * width; };
    auto rows32 = [this, set](Act id, size_t width) { return f32(id, set) + r0_ * width; };

    T* ln1 = rows(Act::Ln1, C);
    norm_forward(ln1, ln ? rows32(Act::Ln1Mean, 1) : nullptr, rows32(Act::Ln1Rstd, 1), in,
                 p + off_.ln1w, opt(off_.ln1b));
    T* qkv = rows(Act::Qkv, w);
    if (s_.qk_norm) {
        T* raw = rows(Act::QkvRaw, w);
        kernels::matmul_forward<T>(ex_, raw, nullptr, ln1, p + off_.wqkv, opt(off_.bqkv), N, C, W);
        kernels::rmsnorm_forward<T>(ex_, qkv, rows32(Act::QRstd, s_.NH), raw, p + off_.qnorm, N,
                                    s_.NH, s_.hd, w, s_.norm_eps);
        kernels::rmsnorm_forward<T>(ex_, qkv + Q, rows32(Act::KRstd, s_.NKV), raw + Q,
                                    p + off_.knorm, N, s_.NKV, s_.hd, w, s_.norm_eps);
        kernels::copy_rows<T>(ex_, qkv + Q + KV, w, raw + Q + KV, w, N, KV); // v unnormalized
    } else {
        kernels::matmul_forward<T>(ex_, qkv, nullptr, ln1, p + off_.wqkv, opt(off_.bqkv), N, C, W);
    }
    if (s_.pos == PosKind::Rope) {
        const float* cs = f32(Act::RopeCos);
        const float* sn = f32(Act::RopeSin);
        const int* pos = i32(Act::Positions);
        kernels::rope_forward<T>(ex_, qkv, cs, sn, pos, N, s_.NH, s_.hd, w);
        kernels::rope_forward<T>(ex_, qkv + Q, cs, sn, pos, N, s_.NKV, s_.hd, w);
    }
    attention_forward(p, l, set);
    T* res2 = rows(Act::Res2, C);
    kernels::matmul_forward<T>(ex_, res2, nullptr, rows(Act::Atty, Q), p + off_.wo, opt(off_.bo), N,
                               Q, C);
    if (resid_drop()) resid_dropout(res2, res2, l, kernels::DropoutTag::ResidualAttn, 0, N);
    kernels::residual_forward<T>(ex_, res2, in, res2, NC);
    T* ln2 = rows(Act::Ln2, C);
    norm_forward(ln2, ln ? rows32(Act::Ln2Mean, 1) : nullptr, rows32(Act::Ln2Rstd, 1), res2,
                 p + off_.ln2w, opt(off_.ln2b));
    if (s_.is_sparse(l)) { // never tiled; the recompute (no output) needs its activations
        moe_forward(p, l, set, output ? out : nullptr, output && moe_stats_);
        return;
    }
    if (!mlp_tiled_) {
        mlp_forward(p, l, set, 0, N, output ? out : nullptr);
        return;
    }
    // TiledMLP: one tile's up projection at a time; the recompute needs none of it here (the
    // backward recomputes each tile right before its gradient)
    if (!output) return;
    for (int r0 = 0; r0 < N; r0 += mlp_rows_)
        mlp_forward(p, l, set, r0, std::min(mlp_rows_, N - r0), out);
}

template <class T> void DriverT<T>::mlp_forward(const T* p, int l, int set, int r0, int n, T* out) {
    const int C = s_.C, I = s_.I;
    const size_t r = static_cast<size_t>(r0) + r0_; // decode: the block buffers' rows r0_..
    auto opt = [p](size_t o) { return o == kNoTensor ? nullptr : p + o; };
    const int fs = mlp_tiled_ ? -1 : set; // tiled: the one tile's buffers
    const T* ln2 = act(Act::Ln2, set) + r * C;
    T* pre = act(Act::FcPre, fs);
    T* fca = act(Act::FcAct, fs);
    if (s_.mlp == MlpKind::Gelu) {
        kernels::matmul_forward<T>(ex_, fca, pre, ln2, p + off_.wfc, opt(off_.bfc), n, C, I);
    } else {
        kernels::matmul_forward<T>(ex_, pre, nullptr, ln2, p + off_.wfc, opt(off_.bfc), n, C,
                                   2 * I);
        kernels::swiglu_forward<T>(ex_, fca, pre, n, I);
    }
    if (!out) return;                         // recompute: the block output is already in res
    T* o = out + static_cast<size_t>(r0) * C; // out starts at the call's first row
    kernels::matmul_forward<T>(ex_, o, nullptr, fca, p + off_.wproj, opt(off_.bproj), n, I, C);
    if (resid_drop()) resid_dropout(o, o, l, kernels::DropoutTag::ResidualMlp, r0, n);
    kernels::residual_forward<T>(ex_, o, act(Act::Res2, set) + r * C, o, static_cast<long>(n) * C);
}

// DRes holds d(block output) on entry and d(block input) on exit. Grads are added into g. With
// residual dropout each branch's output grad is the masked DRes, formed in DLn (free while the
// branch's output projection reads it: the MLP's rows before the fc backward writes them, the
// attention's between the ln2 and the qkv backward).
template <class T>
void DriverT<T>::block_backward(const T* p, float* g, int l, int set, const T* in) {
    const int N = B_ * T_, C = s_.C, Q = s_.Q, W = s_.W, I = s_.I, F = s_.fc_rows();
    const bool ln = s_.norm == NormKind::LayerNorm;
    const size_t w = static_cast<size_t>(W);
    T* d = act(Act::DRes);
    T* dln = act(Act::DLn);
    T* dact = act(Act::DAct);
    T* dfc = act(Act::DFc);
    // MLP, in tiles of mlp_rows_ (TiledMLP: each tile's up projection recomputed first); a
    // sparse block's at once
    const int fs = mlp_tiled_ ? -1 : set;
    if (s_.is_sparse(l)) {
        const T* dr = d;
        if (resid_drop()) { // d(MLP output) = masked d(block output)
            resid_dropout(dln, d, l, kernels::DropoutTag::ResidualMlp, 0, N);
            dr = dln;
        }
        moe_backward(p, g, set, dr);
    }
    for (int r0 = 0; r0 < N && !s_.is_sparse(l); r0 += mlp_rows_) {
        const int n = std::min(mlp_rows_, N - r0);
        const size_t r = static_cast<size_t>(r0);
        if (mlp_tiled_) mlp_forward(p, l, set, r0, n, nullptr);
        const T* dr = d + r * C;
        if (resid_drop()) { // d(MLP output) = masked d(block output)
            resid_dropout(dln + r * C, dr, l, kernels::DropoutTag::ResidualMlp, r0, n);
            dr = dln + r * C;
        }
        const T* pre = act(Act::FcPre, fs);
        kernels::matmul_backward<T>(ex_, dact, g + off_.wproj, dr, act(Act::FcAct, fs),
                                    p + off_.wproj, n, I, C);
        if (off_.bproj != kNoTensor) kernels::bias_grad<T>(ex_, g + off_.bproj, dr, n, C);
        if (s_.mlp == MlpKind::Gelu)
            kernels::gelu_backward<T>(ex_, dfc, pre, dact, static_cast<long>(n) * I);
        else
            kernels::swiglu_backward<T>(ex_, dfc, dact, pre, n, I);
        kernels::matmul_backward<T>(ex_, dln + r * C, g + off_.wfc, dfc, act(Act::Ln2, set) + r * C,
                                    p + off_.wfc, n, C, F);
        if (off_.bfc != kNoTensor) kernels::bias_grad<T>(ex_, g + off_.bfc, dfc, n, F);
    }
    norm_backward(d, g + off_.ln2w, off_.ln2b != kNoTensor ? g + off_.ln2b : nullptr, dln,
                  act(Act::Res2, set), p + off_.ln2w, ln ? f32(Act::Ln2Mean, set) : nullptr,
                  f32(Act::Ln2Rstd, set));
    // attention
    const T* dattn = d; // d(attention branch output)
    if (resid_drop()) {
        resid_dropout(dln, d, l, kernels::DropoutTag::ResidualAttn, 0, N);
        dattn = dln;
    }
    kernels::matmul_backward<T>(ex_, act(Act::DAtty), g + off_.wo, dattn, act(Act::Atty, set),
                                p + off_.wo, N, Q, C);
    if (off_.bo != kNoTensor) kernels::bias_grad<T>(ex_, g + off_.bo, dattn, N, C);
    attention_backward(p, g, l, set);
    T* dqkv = act(Act::DQkv);
    if (s_.pos == PosKind::Rope) {
        const float* cs = f32(Act::RopeCos);
        const float* sn = f32(Act::RopeSin);
        const int* pos = i32(Act::Positions);
        kernels::rope_backward<T>(ex_, dqkv, cs, sn, pos, N, s_.NH, s_.hd, w);
        kernels::rope_backward<T>(ex_, dqkv + Q, cs, sn, pos, N, s_.NKV, s_.hd, w);
    }
    if (s_.qk_norm) { // in place: grads of the normed q, k -> grads of the raw projections
        const T* raw = act(Act::QkvRaw, set);
        kernels::rmsnorm_backward<T>(ex_, dqkv, false, g + off_.qnorm, dqkv, raw, p + off_.qnorm,
                                     f32(Act::QRstd, set), N, s_.NH, s_.hd, w);
        kernels::rmsnorm_backward<T>(ex_, dqkv + Q, false, g + off_.knorm, dqkv + Q, raw + Q,
                                     p + off_.knorm, f32(Act::KRstd, set), N, s_.NKV, s_.hd, w);
    }
    kernels::matmul_backward<T>(ex_, dln, g + off_.wqkv, dqkv, act(Act::Ln1, set), p + off_.wqkv, N,
                                C, W);
    if (off_.bqkv != kNoTensor) kernels::bias_grad<T>(ex_, g + off_.bqkv, dqkv, N, W);
    norm_backward(d, g + off_.ln1w, off_.ln1b != kNoTensor ? g + off_.ln1b : nullptr, dln, in,
                  p + off_.ln1w, ln ? f32(Act::Ln1Mean, set) : nullptr, f32(Act::Ln1Rstd, set));
}

template class DriverT<float>;
template class DriverT<core::bf16>;

} // namespace sof::model
