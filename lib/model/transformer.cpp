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
#include "kernels/moe_aux.h"
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
DriverT<T>::DriverT(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T)
    : s_(block_spec(cfg)), off_(unit_offsets(s_)), recompute_(opts.recompute),
      attn_kernel_(opts.attention_kernel), max_B_(max_B), max_T_(max_T),
      max_BT_(static_cast<size_t>(max_B) * max_T), attn_p_(opts.attn_dropout),
      resid_p_(opts.resid_dropout) {
    const char* arch = arch_name(cfg.arch);
    if (opts.seq && opts.seq->degree() > 1) {
        seq_ = opts.seq;
        P_ = opts.seq->degree();
        sp_index_ = opts.seq->index();
        validate(cfg, P_); // the query and key/value heads over the Ulysses degree
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
        scratch_ = device::make_scratch(*dev_, *stream_, "kernel scratch (model)");
        ex_ = kernels::Exec{kernels::Backend::Cuda, stream_->native(), blas_.get(), scratch_.get()};
    } else {
        kernels::cpu::use_single_threaded_blas(); // the CPU twins parallelize with OpenMP
        ex_ = kernels::cpu_exec();
    }

    for (float r : {opts.attn_dropout, opts.resid_dropout})
        if (!(r >= 0.0f && r < 1.0f))
            SOF_FAIL(Config, "%s: a dropout rate of %g is outside [0, 1)", arch, r);
    if (opts.offload_checkpoints && !recompute_)
        SOF_FAIL(Config,
                 "%s: model.offload_checkpoints keeps the block inputs saved for "
                 "recompute in host memory: it needs model.recompute: true",
                 arch);
    offload_ = opts.offload_checkpoints;
    ActShape shape;
    shape.B = max_B;
    shape.T = max_T;
    shape.P = P_;
    shape.recompute = recompute_;
    shape.act_bytes = static_cast<int>(sizeof(T));
    shape.loss_tile = opts.loss_tile;
    shape.mlp_tile = opts.mlp_tile;
    shape.offload = offload_;
    shape.device_ckpt = opts.device_checkpoints;
    kept_ = kept_checkpoints(shape, s_.L);
    loss_rows_ = loss_rows(shape);
    mlp_rows_ = mlp_rows(shape);
    mlp_tiled_ = mlp_tiled(shape);
    const std::vector<ActBuffer> list = activation_buffers(s_, shape);
    for (auto& v : bufs_)
        v.assign(static_cast<size_t>(recompute_ ? 1 : std::max(1, s_.L)), nullptr);
    try {
        for (const ActBuffer& b : list) {
            const std::string what = core::strfmt("activation %s", b.name.c_str());
            void* p = b.host ? dev_->alloc_pinned(b.bytes, what) : dev_->alloc(b.bytes, what);
            (b.host ? pinned_allocs_ : allocs_).push_back(p);
            bufs_[static_cast<size_t>(b.id)][static_cast<size_t>(std::max(0, b.set))] = p;
            if (!b.host) act_bytes_ += b.bytes;
        }
        if (offload_) {
            d2h_ = dev_->create_stream("checkpoints d2h");
            h2d_ = dev_->create_stream("checkpoints h2d");
            compute_ev_ = dev_->create_event();
            for (int l = 0; l < s_.L; l++) {
                out_done_.push_back(dev_->create_event());
                in_done_.push_back(dev_->create_event());
            }
        }
        h_tokens_.assign(max_BT_, 0);
        h_targets_.assign(max_BT_, 0);
        h_positions_.assign(max_BT_, 0);
        if (!host_mem_) {
            pinned_ids_ = static_cast<int*>(
                dev_->alloc_pinned((3 + static_cast<size_t>(P_)) * max_BT_ * 4, "token ids"));
            pinned_losses_ = static_cast<float*>(dev_->alloc_pinned(max_BT_ * 4, "losses"));
            // the most any op asks for at up to max_BT_ rows: no op grows it on the hot path
            scratch_->reserve(kernels::driver_scratch_bytes(static_cast<int>(max_BT_), s_.E, s_.K));
        }
    } catch (const core::Error& e) {
        scratch_.reset();
        for (void* p : allocs_)
            dev_->free(p);
        for (void* p : pinned_allocs_)
            dev_->free_pinned(p);
        allocs_.clear();
        pinned_allocs_.clear();
        SOF_FAIL(Runtime,
                 "%s: the activations (B=%d, T=%d, L=%d, C=%d: %s in all) do not fit: %s; lower "
                 "train.batch_size / train.seq_len, set model.recompute: true (and "
                 "model.offload_checkpoints: true), or tile the MLP (model.mlp_tile) and the "
                 "loss (model.loss_tile)",
                 arch, max_B, max_T, s_.L, s_.C,
                 device::format_bytes(model::activation_bytes(s_, shape, 1)).c_str(), e.what());
    }
    // buffers whose lifetimes do not meet share memory (activations.h shared_buffer): every set
    // of such a buffer is the host buffer (held once, or set 0: the one set with recompute)
    for (size_t id = 0; id < bufs_.size(); id++) {
        const Act host = shared_buffer(s_, shape, static_cast<Act>(id));
        if (host != Act::kCount)
            for (void*& q : bufs_[id])
                q = bufs_[static_cast<size_t>(host)][0];
    }
    if (s_.E > 0) {
        moe_host_off_.assign(static_cast<size_t>(recompute_ ? 1 : std::max(1, s_.L)),
                             std::vector<int>(static_cast<size_t>(s_.E) + 1, 0));
        moe_aux_on_ = cfg.output_router_logits && cfg.router_aux_loss_coef > 0.0f;
        moe_coef_ = cfg.router_aux_loss_coef;
        moe_z_coef_ = opts.router_z_loss_coef;
        moe_sparse_ = std::find(s_.sparse.begin(), s_.sparse.end(), 1) != s_.sparse.end();
    }
    if (s_.pos == PosKind::Rope) {
        rope_inv_ = rope_inv_freq(cfg);
        rope_scale_ = rope_attention_scale(cfg);
        rope_tables(sp_index_ * max_T);
    }
}

// cos/sin of the positions base .. base + max_T - 1 (this rank's slice of the sequence: RoPE runs
// on the local tokens before the exchange); the positions buffer holds the offsets from base.
template <class T> void DriverT<T>::rope_tables(int base) {
    rope_fill(static_cast<size_t>(max_T_), [base](size_t j) { return base + static_cast<int>(j); });
    rope_base_ = base;
}

template <class T> void DriverT<T>::rope_rows(const int* positions, int n) {
    rope_fill(static_cast<size_t>(n), [positions](size_t j) { return positions[j]; });
    rope_base_ = -1; // the next unpacked forward rebuilds the slice's rows
}

template <class T> template <class F> void DriverT<T>::rope_fill(size_t rows, F position_of) {
    const size_t half = static_cast<size_t>(s_.hd / 2);
    std::vector<float> c(rows * half), sn(rows * half);
    for (size_t j = 0; j < rows; j++) {
        const float pos = static_cast<float>(position_of(j));
        for (size_t i = 0; i < half; i++) {
            const float angle = pos * rope_inv_[i]; // fp32, as HF computes it
            // YaRN scales cos and sin (so q and k) by its attention factor, in fp32 as HF does
            c[j * half + i] =
                static_cast<float>(std::cos(static_cast<double>(angle))) * rope_scale_;
            sn[j * half + i] =
                static_cast<float>(std::sin(static_cast<double>(angle))) * rope_scale_;
        }
    }
    upload(f32(Act::RopeCos), c.data(), c.size() * 4);
    upload(f32(Act::RopeSin), sn.data(), sn.size() * 4);
    sync();
}

template <class T> DriverT<T>::~DriverT() {
    // a destructor must not throw: after a device fault the driver is destroyed while that error
    // unwinds, and a second exception here would end the rank in std::terminate, past the error
    // report and MPI_Abort (app/fatal.cpp)
    try {
        if (!host_mem_ && stream_) dev_->synchronize(*stream_);
    } catch (...) {
    }
    scratch_.reset(); // frees through dev_ while stream_ is alive
    try {
        if (d2h_) dev_->synchronize(*d2h_);
        if (h2d_) dev_->synchronize(*h2d_);
    } catch (...) {
    }
    for (void* p : allocs_)
        dev_->free(p);
    for (void* p : pinned_allocs_)
        dev_->free_pinned(p);
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
    const int L = s_.L, C = s_.C, V = s_.V, N = B * Tl;
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
    // RoPE reads its tables by row (activations.h RopeCos): unpacked, row j is position t0 + j
    // (built once per slice start); packed, row n is token n's own position (built per batch)
    if (s_.pos == PosKind::Rope) {
        if (packed_) {
            rope_rows(h_positions_.data(), N);
            for (int n = 0; n < N; n++)
                h_positions_[static_cast<size_t>(n)] = n;
        } else {
            if (rope_base_ != t0) rope_tables(t0);
            for (int n = 0; n < N; n++)
                h_positions_[static_cast<size_t>(n)] = n % Tl;
        }
    }
    upload_ids(targets, segments, N, static_cast<size_t>(N) * P_);
    cached_ = 0; // the block buffers now hold this batch

    const bool tied = s_.tied_head;
    const T* p0 = reinterpret_cast<const T*>(w.acquire(0, Pass::Forward));
    kernels::embedding_forward(ex_, res_at(0), i32(Act::Tokens), i32(Act::Positions), p0 + off_.wte,
                               s_.pos == PosKind::Learned ? p0 + off_.wpe : nullptr, N, C);
    if (!tied) w.release(0, Pass::Forward);
    save_checkpoint(0);
    moe_stats_ = moe_sparse_ && targets; // the load-balancing statistics of a training forward
    if (moe_stats_)
        kernels::zero(ex_, f32(Act::MoeStats),
                      static_cast<size_t>(kernels::moe_aux_stats_size(s_.E)) * sizeof(float));
    detail::forward_blocks(w, L, [this](int l, const float* p) {
        slot_free(l + 1);
        block_forward(reinterpret_cast<const T*>(p), l, set_of(l), res_at(l), res_at(l + 1), true);
        save_checkpoint(l + 1);
    });
    scratch_layer_ = recompute_ ? L - 1 : -1;
    const T* pf = reinterpret_cast<const T*>(w.acquire(L + 1, Pass::Forward));
    head_forward(pf, tied ? p0 + off_.wte : pf + off_.head, targets ? i32(Act::Targets) : nullptr);
    w.release(L + 1, Pass::Forward);
    if (tied) w.release(0, Pass::Forward);
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
    const float ce = detail::mean_loss(losses, h_targets_.data(), N);
    if (!moe_stats_) return ce;
    // transformers' loss: + router_aux_loss_coef x balance when it is on; + the z-loss's term
    return ce + static_cast<float>(moe_losses());
}

// The new rows run through the same block code as training, on the rows r0_ = pos0.. of the
// per-block buffers: each block's Qkv rows 0..pos0-1 (post-RoPE k, v) are the cache, and
// attention computes only the new query rows (q_begin) against keys 0..pos0+n-1.
template <class T> void DriverT<T>::decode(WeightSource& w, const int* tokens, int n, int pos0) {
    const char* arch = s_.pos == PosKind::Learned ? "gpt2" : "llama family";
    struct NoDropout { // decoding never drops; training's setting is back afterwards
        bool& on;
        const bool was;
        ~NoDropout() { on = was; }
    } no_dropout{drop_on_, drop_on_};
    drop_on_ = false;
    moe_stats_ = false;
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
    if (s_.pos == PosKind::Rope && rope_base_ != 0) rope_tables(0); // rows = positions 0..
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
            block_forward(reinterpret_cast<const T*>(p), l, l, res_at(l) + r0 * C,
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

template <class T> void DriverT<T>::set_dropout(const DropoutStep* s) {
    drop_on_ = s != nullptr;
    if (s) drop_ = *s;
}

template <class T> void DriverT<T>::backward(WeightSource& w, GradSink& sink, float dloss) {
    if (!have_targets_)
        SOF_FAIL(Internal, "transformer backward called without a forward with targets before it");
    const int L = s_.L, C = s_.C, N = B_ * T_;
    const bool tied = s_.tied_head;
    dloss_ = dloss;

    // LM head + loss, tile by tile: dlnf into DLn, head grads added
    const T* p0 = tied ? reinterpret_cast<const T*>(w.acquire(0, Pass::Backward)) : nullptr;
    const T* pf = reinterpret_cast<const T*>(w.acquire(L + 1, Pass::Backward));
    float* gf = sink.grads(L + 1);
    // dres = the final norm's input grad (the residual stream's grad from here down)
    kernels::zero(ex_, act(Act::DRes), static_cast<size_t>(N) * C * sizeof(T));
    head_backward(pf, gf, tied ? p0 + off_.wte : pf + off_.head,
                  tied ? sink.grads(0) + off_.wte : gf + off_.head, dloss);
    w.release(L + 1, Pass::Backward);
    sink.unit_done(L + 1);

    ready_layer_ = -1;
    detail::backward_blocks(
        w, sink, L, [this](int l) { return recompute_ && scratch_layer_ != l; },
        [this](int l, const float* p) {
            checkpoint_ready(l);
            block_forward(reinterpret_cast<const T*>(p), l, 0, res_at(l), nullptr, false);
            scratch_layer_ = l;
        },
        [this](int l, const float* p, float* g) {
            checkpoint_ready(l);
            block_backward(reinterpret_cast<const T*>(p), g, l, set_of(l), res_at(l));
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

// Forward of the final norm, the LM head and the loss over tiles of loss_rows_ rows: the tile's
// normed rows and logits, its losses and softmax statistics (the norm's mean/rstd of every row
// are kept); nothing of size B*T x Vp. The last tile's lnf and logits stay.
template <class T> void DriverT<T>::head_forward(const T* pf, const T* head, const int* targets) {
    const int N = B_ * T_, C = s_.C, V = s_.V, Vp = s_.Vp;
    for (int r0 = 0; r0 < N; r0 += loss_rows_) {
        const int n = std::min(loss_rows_, N - r0);
        const size_t r = static_cast<size_t>(r0);
        final_norm(pf, r0, n);
        kernels::matmul_forward<T>(ex_, act(Act::Logits), nullptr, act(Act::Lnf), head, nullptr, n,
                                   C, Vp);
        kernels::xent_forward<T>(ex_, f32(Act::Losses) + r, f32(Act::XentStats) + 2 * r,
                                 act(Act::Logits), targets ? targets + r : nullptr, n, V, Vp);
    }
}

template <class T> void DriverT<T>::final_norm(const T* pf, int r0, int n) {
    const size_t r = static_cast<size_t>(r0);
    norm_forward(act(Act::Lnf), s_.norm == NormKind::LayerNorm ? f32(Act::LnfMean) + r : nullptr,
                 f32(Act::LnfRstd) + r, res_at(s_.L) + r * s_.C, pf + off_.lnfw,
                 off_.lnfb != kNoTensor ? pf + off_.lnfb : nullptr, n);
}

// Backward of the loss, the head and the final norm, last tile first: the tile's normed rows and
// logits again (the last tile's are still there from the forward), dlogits over them from the
// saved statistics, the tile's dlnf rows (DLn) and share of the head grads, then the norm's
// backward of those rows into DRes and the norm grads (gf). Untiled: the one-shot backward.
template <class T>
void DriverT<T>::head_backward(const T* pf, float* gf, const T* head, float* ghead, float dloss) {
    const int N = B_ * T_, C = s_.C, V = s_.V, Vp = s_.Vp;
    const int tiles = (N + loss_rows_ - 1) / loss_rows_;
    const bool ln = s_.norm == NormKind::LayerNorm;
    T* lg = act(Act::Logits);
    T* lnf = act(Act::Lnf);
    for (int t = tiles - 1; t >= 0; t--) {
        const int r0 = t * loss_rows_, n = std::min(loss_rows_, N - r0);
        const size_t r = static_cast<size_t>(r0);
        if (t != tiles - 1) {
            final_norm(pf, r0, n);
            kernels::matmul_forward<T>(ex_, lg, nullptr, lnf, head, nullptr, n, C, Vp);
        }
        kernels::xent_backward<T>(ex_, lg, lg, f32(Act::XentStats) + 2 * r, i32(Act::Targets) + r,
                                  dloss, n, V, Vp);
        T* dln = act(Act::DLn) + r * C;
        kernels::matmul_backward<T>(ex_, dln, ghead, lg, lnf, head, n, C, Vp);
        norm_backward(act(Act::DRes) + r * C, gf + off_.lnfw,
                      off_.lnfb != kNoTensor ? gf + off_.lnfb : nullptr, dln, res_at(s_.L) + r * C,
                      pf + off_.lnfw, ln ? f32(Act::LnfMean) + r : nullptr, f32(Act::LnfRstd) + r,
                      n);
    }
}

// Offloaded checkpoints. Forward: res[l] (l <= L-2) goes to host memory on d2h_ once written;
// block l writes res[l+1] into the slot of res[l-1], so it first waits for that copy. res[L-1]
// and res[L] stay in their slots for the backward's start. Backward: block l's input must be
// back (in_done_[l]); then res[l-1] is fetched into the slot of res[l+1], which no later work
// reads, so the copy runs while block l recomputes and runs its backward.
template <class T> void DriverT<T>::save_checkpoint(int l) {
    if (!offload_ || l < kept_ || l > s_.L - 2) return;
    after_compute(*d2h_);
    const size_t bytes = static_cast<size_t>(B_) * T_ * s_.C * sizeof(T);
    dev_->copy(host_at(l), res_at(l), bytes, device::CopyKind::DeviceToHost, *d2h_);
    dev_->record(*out_done_[static_cast<size_t>(l)], *d2h_);
}

template <class T> void DriverT<T>::slot_free(int l) {
    if (offload_ && l - 2 >= kept_) compute_waits(*out_done_[static_cast<size_t>(l - 2)]);
}

template <class T> void DriverT<T>::checkpoint_ready(int l) {
    if (!offload_ || ready_layer_ == l) return;
    ready_layer_ = l;
    if (l >= kept_ && l <= s_.L - 2) compute_waits(*in_done_[static_cast<size_t>(l)]);
    if (l - 1 < kept_) return;
    const int k = l - 1; // fetched now, needed by the next block
    after_compute(*h2d_);
    dev_->wait(*h2d_, *out_done_[static_cast<size_t>(k)]);
    const size_t bytes = static_cast<size_t>(B_) * T_ * s_.C * sizeof(T);
    dev_->copy(res_at(k), host_at(k), bytes, device::CopyKind::HostToDevice, *h2d_);
    dev_->record(*in_done_[static_cast<size_t>(k)], *h2d_);
}

// The CPU twins run on the calling thread: their work is done when they return, and the compute
// side waits for an event on the host. The CUDA twins run on stream_: streams wait on events.
template <class T> void DriverT<T>::after_compute(device::Stream& s) {
    if (host_mem_) return;
    dev_->record(*compute_ev_, *stream_);
    dev_->wait(s, *compute_ev_);
}

template <class T> void DriverT<T>::compute_waits(device::Event& e) {
    if (host_mem_)
        e.synchronize();
    else
        dev_->wait(*stream_, e);
}

template <class T> std::vector<float> DriverT<T>::logits() const {
    if (loss_rows_ < B_ * T_)
        SOF_FAIL(Runtime,
                 "transformer: the logits of all %d positions are not kept: the LM head runs in "
                 "tiles of %d rows (model.loss_tile = 0 keeps them whole)",
                 B_ * T_, loss_rows_);
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
    if (opts.router_z_loss_coef != 0.0f) {
        bool sparse = false;
        for (int l = 0; l < cfg.num_layers; l++)
            sparse |= cfg.sparse_layer(l);
        if (!(opts.router_z_loss_coef > 0.0f) || !sparse)
            SOF_FAIL(Config, "model.router_z_loss_coef = %g: %s; set it to 0 (off)",
                     opts.router_z_loss_coef,
                     sparse ? "it must be >= 0"
                            : "the router z-loss needs a mixture-of-experts model, and this "
                              "model has no sparse layer (model.num_experts = 0 or every layer "
                              "in model.mlp_only_layers)");
    }
    const bool cuda = opts.device && !opts.device->host_accessible();
    if (cuda && opts.bf16)
        impl_ = std::make_unique<DriverT<core::bf16>>(cfg, opts, max_B, max_T);
    else
        impl_ = std::make_unique<DriverT<float>>(cfg, opts, max_B, max_T);
}

Transformer::~Transformer() = default;

float Transformer::forward(WeightSource& w, const int* inputs, const int* targets,
                           const int* segments, int B, int T) {
    return impl_->forward(w, inputs, targets, segments, B, T);
}
void Transformer::decode(WeightSource& w, const int* tokens, int n, int pos0) {
    impl_->decode(w, tokens, n, pos0);
}
void Transformer::set_dropout(const DropoutStep* s) {
    impl_->set_dropout(s);
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
RouterLosses Transformer::router_losses() const {
    return impl_->router_losses();
}

} // namespace sof::model
