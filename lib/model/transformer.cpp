// The transformer driver: buffers from the device, the unit protocol of forward and backward
// (embedding, blocks, final norm, LM head, loss) over the kernel seam. Blocks: transformer_block.
#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "device/device.h"
#include "device/host_device.h"
#include "kernels/blas.h"
#include "kernels/copy.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/xent.h"
#include "model/transformer_impl.h"
#include "model/unit_loop.h"

namespace sof::model {

namespace {

// A device that never runs out for a model built without one (tests, tools): host memory.
constexpr size_t kOwnDeviceBytes = size_t{1} << 46;

} // namespace

template <class T>
DriverT<T>::DriverT(const ArchConfig& cfg, const ParamLayout& layout, const ModelOptions& opts,
                    int max_B, int max_T)
    : s_(block_spec(cfg)), off_(unit_offsets(layout)), recompute_(opts.recompute), max_B_(max_B),
      max_T_(max_T), max_BT_(static_cast<size_t>(max_B) * max_T) {
    const char* arch = arch_name(cfg.arch);
    if (opts.seq && opts.seq->degree() > 1) {
        seq_ = opts.seq;
        P_ = opts.seq->degree();
        sp_index_ = opts.seq->index();
        if (s_.NH % P_ != 0 || s_.NKV % P_ != 0)
            SOF_FAIL(Config,
                     "%s: model.num_heads = %d and model.num_kv_heads = %d must both be divisible "
                     "by parallel.sp = %d (Ulysses splits the query and the key/value heads over "
                     "the sequence-parallel ranks)",
                     arch, s_.NH, s_.NKV, P_);
        if (static_cast<long>(max_T) * P_ > cfg.max_seq_len)
            SOF_FAIL(Config, "sequence length %d x %d > model.max_seq_len = %d", max_T, P_,
                     cfg.max_seq_len);
    }
    if (opts.device) {
        dev_ = opts.device;
        stream_ = opts.stream;
    } else {
        owned_dev_ = std::make_unique<device::HostDevice>(kOwnDeviceBytes, nullptr);
        dev_ = owned_dev_.get();
    }
    host_mem_ = dev_->host_accessible();
    if (!host_mem_) {
        if (!stream_) SOF_FAIL(Internal, "%s: a CUDA device needs a compute stream", arch);
        blas_ = kernels::cuda::Blas::create(stream_->native());
        ex_ = kernels::Exec{kernels::Backend::Cuda, stream_->native(), blas_.get()};
    } else {
        kernels::cpu::use_single_threaded_blas(); // the CPU twins parallelize with OpenMP
        ex_ = kernels::cpu_exec();
    }

    ActShape shape{max_B, max_T, P_, recompute_, static_cast<int>(sizeof(T))};
    const std::vector<ActBuffer> list = activation_buffers(s_, shape);
    for (auto& v : bufs_)
        v.assign(static_cast<size_t>(recompute_ ? 1 : std::max(1, s_.L)), nullptr);
    try {
        for (const ActBuffer& b : list) {
            void* p = dev_->alloc(b.bytes, core::strfmt("activation %s", b.name.c_str()));
            allocs_.push_back(p);
            bufs_[static_cast<size_t>(b.id)][static_cast<size_t>(std::max(0, b.set))] = p;
            act_bytes_ += b.bytes;
        }
        h_tokens_.assign(max_BT_, 0);
        h_targets_.assign(max_BT_, 0);
        h_positions_.assign(max_BT_, 0);
        if (!host_mem_) {
            pinned_ids_ = static_cast<int*>(
                dev_->alloc_pinned((3 + static_cast<size_t>(P_)) * max_BT_ * 4, "token ids"));
            pinned_losses_ = static_cast<float*>(dev_->alloc_pinned(max_BT_ * 4, "losses"));
        }
    } catch (const core::Error& e) {
        for (void* p : allocs_)
            dev_->free(p);
        allocs_.clear();
        SOF_FAIL(Runtime,
                 "%s: the activations (B=%d, T=%d, L=%d, C=%d: %s in all) do not fit: %s; lower "
                 "train.batch_size / train.seq_len or set model.recompute: true",
                 arch, max_B, max_T, s_.L, s_.C,
                 device::format_bytes(model::activation_bytes(s_, shape, 1)).c_str(), e.what());
    }
    if (s_.pos == PosKind::Rope) { // cos/sin of every position this rank may see
        const std::vector<float> inv = rope_inv_freq(cfg);
        const size_t half = static_cast<size_t>(s_.hd / 2);
        const size_t npos = static_cast<size_t>(max_T) * P_;
        std::vector<float> c(npos * half), sn(npos * half);
        for (size_t pos = 0; pos < npos; pos++) {
            for (size_t i = 0; i < half; i++) {
                const float angle = static_cast<float>(pos) * inv[i]; // fp32, as HF computes it
                c[pos * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
                sn[pos * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
            }
        }
        upload(f32(Act::RopeCos), c.data(), c.size() * 4);
        upload(f32(Act::RopeSin), sn.data(), sn.size() * 4);
        sync();
    }
}

template <class T> DriverT<T>::~DriverT() {
    if (!host_mem_ && stream_) dev_->synchronize(*stream_);
    for (void* p : allocs_)
        dev_->free(p);
    if (pinned_ids_) dev_->free_pinned(pinned_ids_);
    if (pinned_losses_) dev_->free_pinned(pinned_losses_);
}

template <class T> void* DriverT<T>::ptr(Act id, int set) const {
    void* p = bufs_[static_cast<size_t>(id)][static_cast<size_t>(std::max(0, set))];
    if (!p) SOF_FAIL(Internal, "transformer: activation buffer %d (set %d) missing", int(id), set);
    return p;
}

// Host bytes into a buffer of the device (asynchronously on CUDA: the source must stay valid
// until the next sync()).
template <class T> void DriverT<T>::upload(void* dst, const void* src, size_t bytes) {
    if (host_mem_) {
        std::memcpy(dst, src, bytes);
        return;
    }
    dev_->copy(dst, src, bytes, device::CopyKind::HostToDevice, *stream_);
}

template <class T>
void DriverT<T>::upload_ids(const int* targets, const int* segments, int N, size_t nseg) {
    const size_t n = static_cast<size_t>(N);
    if (host_mem_) {
        upload(i32(Act::Tokens), h_tokens_.data(), n * 4);
        upload(i32(Act::Positions), h_positions_.data(), n * 4);
        if (targets) upload(i32(Act::Targets), h_targets_.data(), n * 4);
        if (segments) upload(i32(Act::Segments), segments, nseg * 4);
        return;
    }
    // through pinned staging: the copies are asynchronous
    std::memcpy(pinned_ids_, h_tokens_.data(), n * 4);
    std::memcpy(pinned_ids_ + max_BT_, h_positions_.data(), n * 4);
    if (targets) std::memcpy(pinned_ids_ + 2 * max_BT_, h_targets_.data(), n * 4);
    if (segments) std::memcpy(pinned_ids_ + 3 * max_BT_, segments, nseg * 4);
    upload(i32(Act::Tokens), pinned_ids_, n * 4);
    upload(i32(Act::Positions), pinned_ids_ + max_BT_, n * 4);
    if (targets) upload(i32(Act::Targets), pinned_ids_ + 2 * max_BT_, n * 4);
    if (segments) upload(i32(Act::Segments), pinned_ids_ + 3 * max_BT_, nseg * 4);
}

template <class T> void DriverT<T>::sync() {
    if (!host_mem_) dev_->synchronize(*stream_);
}

template <class T>
float DriverT<T>::forward(WeightSource& w, const int* inputs, const int* targets,
                          const int* segments, int B, int Tl) {
    if (B <= 0 || Tl <= 0 || B > max_B_ || Tl > max_T_)
        SOF_FAIL(Runtime,
                 "transformer forward: batch (B=%d, T=%d) outside the allocated (1..%d, "
                 "1..%d)",
                 B, Tl, max_B_, max_T_);
    const int L = s_.L, C = s_.C, V = s_.V, Vp = s_.Vp, N = B * Tl;
    detail::check_tokens("transformer", inputs, targets, N, V);
    B_ = B;
    T_ = Tl;
    have_targets_ = targets != nullptr;
    std::copy(inputs, inputs + N, h_tokens_.begin());
    if (targets) std::copy(targets, targets + N, h_targets_.begin());
    // this rank's slice of the sequence starts at t0 = sp_index*T; packed: a position counts
    // from its document's first position (which may lie on an earlier rank's slice)
    const int t0 = sp_index_ * Tl, Tw = P_ * Tl;
    packed_ = segments != nullptr;
    for (int b = 0; b < B; b++) {
        const int* seg = segments ? segments + static_cast<size_t>(b) * Tw : nullptr;
        int start = 0;
        if (seg)
            for (start = t0; start > 0 && seg[start - 1] == seg[t0];)
                start--;
        for (int i = 0; i < Tl; i++) {
            const int t = t0 + i;
            if (seg && i > 0 && seg[t] != seg[t - 1]) start = t;
            h_positions_[static_cast<size_t>(b) * Tl + i] = t - start;
        }
    }
    upload_ids(targets, segments, N, static_cast<size_t>(N) * P_);
    cached_ = 0; // the block buffers now hold this batch

    const bool tied = s_.tied_head;
    const T* p0 = reinterpret_cast<const T*>(w.acquire(0, Pass::Forward));
    kernels::embedding_forward(ex_, res_at(0), i32(Act::Tokens), i32(Act::Positions), p0 + off_.wte,
                               s_.pos == PosKind::Learned ? p0 + off_.wpe : nullptr, N, C);
    if (!tied) w.release(0, Pass::Forward);
    detail::forward_blocks(w, L, [this](int l, const float* p) {
        block_forward(reinterpret_cast<const T*>(p), set_of(l), res_at(l), res_at(l + 1), true);
    });
    scratch_layer_ = recompute_ ? L - 1 : -1;
    const T* pf = reinterpret_cast<const T*>(w.acquire(L + 1, Pass::Forward));
    norm_forward(act(Act::Lnf), s_.norm == NormKind::LayerNorm ? f32(Act::LnfMean) : nullptr,
                 f32(Act::LnfRstd), res_at(L), pf + off_.lnfw,
                 off_.lnfb != kNoTensor ? pf + off_.lnfb : nullptr);
    const T* head = tied ? p0 + off_.wte : pf + off_.head;
    kernels::matmul_forward<T>(ex_, act(Act::Logits), nullptr, act(Act::Lnf), head, nullptr, N, C,
                               Vp);
    w.release(L + 1, Pass::Forward);
    if (tied) w.release(0, Pass::Forward);
    kernels::xent_forward<T>(ex_, f32(Act::Losses), f32(Act::XentStats), act(Act::Logits),
                             targets ? i32(Act::Targets) : nullptr, N, V, Vp);
    if (!targets) {
        sync();
        return 0.0f;
    }
    const float* losses = f32(Act::Losses);
    if (!host_mem_) {
        dev_->copy(pinned_losses_, losses, static_cast<size_t>(N) * 4,
                   device::CopyKind::DeviceToHost, *stream_);
        sync();
        losses = pinned_losses_;
    }
    return detail::mean_loss(losses, h_targets_.data(), N);
}

// The new rows run through the same block code as training, on the rows r0_ = pos0.. of the
// per-block buffers: each block's Qkv rows 0..pos0-1 (post-RoPE k, v) are the cache, and
// attention computes only the new query rows (q_begin) against keys 0..pos0+n-1.
template <class T> void DriverT<T>::decode(WeightSource& w, const int* tokens, int n, int pos0) {
    const char* arch = s_.pos == PosKind::Learned ? "gpt2" : "llama family";
    if (P_ > 1 || recompute_)
        SOF_FAIL(Config,
                 "%s: decoding with a KV cache runs on one rank without recompute (parallel.sp = "
                 "1, model.recompute: false)",
                 arch);
    if (n <= 0 || pos0 < 0 || static_cast<long>(pos0) + n > max_T_)
        SOF_FAIL(Runtime, "decode: positions %d..%d outside the allocated 0..%d", pos0,
                 pos0 + n - 1, max_T_ - 1);
    if (pos0 > cached_)
        SOF_FAIL(Runtime,
                 "decode: tokens at position %d but the cache holds positions 0..%d only (start "
                 "a sequence at 0)",
                 pos0, cached_ - 1);
    const int L = s_.L, C = s_.C, V = s_.V, Vp = s_.Vp;
    detail::check_tokens("transformer decode", tokens, nullptr, n, V);
    B_ = 1;
    T_ = n;
    have_targets_ = false;
    packed_ = false;
    std::copy(tokens, tokens + n, h_tokens_.begin());
    for (int i = 0; i < n; i++)
        h_positions_[static_cast<size_t>(i)] = pos0 + i;
    upload_ids(nullptr, nullptr, n, 0);

    const size_t r0 = static_cast<size_t>(pos0);
    const bool tied = s_.tied_head;
    const T* p0 = reinterpret_cast<const T*>(w.acquire(0, Pass::Forward));
    kernels::embedding_forward(ex_, res_at(0) + r0 * C, i32(Act::Tokens), i32(Act::Positions),
                               p0 + off_.wte, s_.pos == PosKind::Learned ? p0 + off_.wpe : nullptr,
                               n, C);
    if (!tied) w.release(0, Pass::Forward);
    r0_ = r0;
    try {
        detail::forward_blocks(w, L, [this, r0, C](int l, const float* p) {
            block_forward(reinterpret_cast<const T*>(p), l, res_at(l) + r0 * C,
                          res_at(l + 1) + r0 * C, true);
        });
    } catch (...) {
        r0_ = 0;
        throw;
    }
    r0_ = 0;
    cached_ = pos0 + n;
    const T* pf = reinterpret_cast<const T*>(w.acquire(L + 1, Pass::Forward));
    norm_forward(act(Act::Lnf), s_.norm == NormKind::LayerNorm ? f32(Act::LnfMean) : nullptr,
                 f32(Act::LnfRstd), res_at(L) + r0 * C, pf + off_.lnfw,
                 off_.lnfb != kNoTensor ? pf + off_.lnfb : nullptr);
    const T* head = tied ? p0 + off_.wte : pf + off_.head;
    kernels::matmul_forward<T>(ex_, act(Act::Logits), nullptr, act(Act::Lnf), head, nullptr, n, C,
                               Vp);
    w.release(L + 1, Pass::Forward);
    if (tied) w.release(0, Pass::Forward);
    sync();
}

template <class T> void DriverT<T>::backward(WeightSource& w, GradSink& sink, float dloss) {
    if (!have_targets_)
        SOF_FAIL(Internal, "transformer backward called without a forward with targets before it");
    const int L = s_.L, C = s_.C, V = s_.V, Vp = s_.Vp, N = B_ * T_;
    const bool tied = s_.tied_head;

    // LM head: dlogits overwrite the logits
    const T* p0 = tied ? reinterpret_cast<const T*>(w.acquire(0, Pass::Backward)) : nullptr;
    const T* pf = reinterpret_cast<const T*>(w.acquire(L + 1, Pass::Backward));
    float* gf = sink.grads(L + 1);
    T* dlogits = act(Act::Logits);
    kernels::xent_backward<T>(ex_, dlogits, dlogits, f32(Act::XentStats), i32(Act::Targets), dloss,
                              N, V, Vp);
    const T* head = tied ? p0 + off_.wte : pf + off_.head;
    float* ghead = tied ? sink.grads(0) + off_.wte : gf + off_.head;
    kernels::matmul_backward<T>(ex_, act(Act::DLn), ghead, dlogits, act(Act::Lnf), head, N, C, Vp);

    // final norm: dres = its input grad (the residual stream's grad from here down)
    kernels::zero(ex_, act(Act::DRes), static_cast<size_t>(N) * C * sizeof(T));
    norm_backward(act(Act::DRes), gf + off_.lnfw, off_.lnfb != kNoTensor ? gf + off_.lnfb : nullptr,
                  act(Act::DLn), res_at(L), pf + off_.lnfw,
                  s_.norm == NormKind::LayerNorm ? f32(Act::LnfMean) : nullptr, f32(Act::LnfRstd));
    w.release(L + 1, Pass::Backward);
    sink.unit_done(L + 1);

    detail::backward_blocks(
        w, sink, L, [this](int l) { return recompute_ && scratch_layer_ != l; },
        [this](int l, const float* p) {
            block_forward(reinterpret_cast<const T*>(p), 0, res_at(l), nullptr, false);
            scratch_layer_ = l;
        },
        [this](int l, const float* p, float* g) {
            block_backward(reinterpret_cast<const T*>(p), g, set_of(l), res_at(l));
        });

    // the embedding backward reads only token ids: untied, unit 0's weights are not needed
    float* g0 = sink.grads(0);
    kernels::embedding_backward<T>(
        ex_, g0 + off_.wte, s_.pos == PosKind::Learned ? g0 + off_.wpe : nullptr, act(Act::DRes),
        i32(Act::Tokens), i32(Act::Positions), h_tokens_.data(), h_positions_.data(), N, C);
    if (tied) w.release(0, Pass::Backward);
    sink.unit_done(0);
    have_targets_ = false; // dlogits replaced the logits: a second backward needs a new forward
}

template <class T> std::vector<float> DriverT<T>::logits() const {
    const size_t n = static_cast<size_t>(B_) * T_ * s_.Vp;
    std::vector<float> out(n);
    const T* lg = act(Act::Logits);
    if (host_mem_) {
        for (size_t i = 0; i < n; i++)
            out[i] = core::to_f32(lg[i]);
        return out;
    }
    std::vector<T> tmp(n);
    dev_->copy(tmp.data(), lg, n * sizeof(T), device::CopyKind::DeviceToHost, *stream_);
    dev_->synchronize(*stream_);
    for (size_t i = 0; i < n; i++)
        out[i] = core::to_f32(tmp[i]);
    return out;
}

template class DriverT<float>;
template class DriverT<core::bf16>;

Transformer::Transformer(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T)
    : cfg_(cfg), layout_(make_layout(cfg)) {
    if (max_B <= 0 || max_T <= 0)
        SOF_FAIL(Config, "%s: batch size %d and sequence length %d must be positive",
                 arch_name(cfg.arch), max_B, max_T);
    if (max_T > cfg.max_seq_len)
        SOF_FAIL(Config, "sequence length %d exceeds model.max_seq_len = %d", max_T,
                 cfg.max_seq_len);
    const bool cuda = opts.device && !opts.device->host_accessible();
    if (cuda && opts.bf16)
        impl_ = std::make_unique<DriverT<core::bf16>>(cfg, layout_, opts, max_B, max_T);
    else
        impl_ = std::make_unique<DriverT<float>>(cfg, layout_, opts, max_B, max_T);
}

Transformer::~Transformer() = default;

float Transformer::forward(WeightSource& w, const int* inputs, const int* targets,
                           const int* segments, int B, int T) {
    return impl_->forward(w, inputs, targets, segments, B, T);
}
void Transformer::decode(WeightSource& w, const int* tokens, int n, int pos0) {
    impl_->decode(w, tokens, n, pos0);
}
void Transformer::backward(WeightSource& w, GradSink& sink, float dloss) {
    impl_->backward(w, sink, dloss);
}
std::vector<float> Transformer::logits() const {
    return impl_->logits();
}
size_t Transformer::activation_bytes() const {
    return impl_->activation_bytes();
}

} // namespace sof::model
