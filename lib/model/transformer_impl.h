// Internal to model/: the transformer driver for one activation dtype T (float on the CPU twins;
// float or bf16 on CUDA): its buffers, the per-block forward/backward and the Ulysses exchange.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "device/device.h"
#include "kernels/exec.h"
#include "kernels/grouped_matmul.h"
#include "model/activations.h"
#include "model/block_spec.h"
#include "model/transformer.h"

namespace sof::kernels::cuda {
class Blas;
}

namespace sof::model {

class Transformer::Driver {
  public:
    virtual ~Driver() = default;
    virtual float forward(WeightSource& w, const int* inputs, const int* targets,
                          const int* segments, int B, int T) = 0;
    virtual void decode(WeightSource& w, const int* tokens, int n, int pos0) = 0;
    virtual void set_dropout(const DropoutStep* s) = 0;
    virtual void backward(WeightSource& w, GradSink& sink, float dloss) = 0;
    virtual std::vector<float> logits() const = 0;
    virtual size_t activation_bytes() const = 0;
    virtual RouterLosses router_losses() const = 0;
};

template <class T> class DriverT : public Transformer::Driver {
  public:
    DriverT(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T);
    ~DriverT() override;
    float forward(WeightSource& w, const int* inputs, const int* targets, const int* segments,
                  int B, int Tl) override;
    void decode(WeightSource& w, const int* tokens, int n, int pos0) override;
    void set_dropout(const DropoutStep* s) override;
    void backward(WeightSource& w, GradSink& sink, float dloss) override;
    std::vector<float> logits() const override;
    size_t activation_bytes() const override { return act_bytes_; }
    RouterLosses router_losses() const override { return {moe_sparse_, moe_balance_, moe_z_}; }

  private:
    // block l's parameters / grads start at the unit's start; `set`: the activation set of l
    void block_forward(const T* p, int l, int set, const T* in, T* out, bool output);
    void block_backward(const T* p, float* g, int l, int set, const T* in);
    // the MLP over rows [r0, r0+n) of ln2: up projection and activation into FcPre/FcAct (the
    // tile buffers when tiled: row 0 = r0), then with `out` the down projection, its residual
    // dropout (block l) and the residual
    void mlp_forward(const T* p, int l, int set, int r0, int n, T* out);
    // a sparse block's MLP (transformer_moe.cpp) over its B*T rows: router, top-k, dispatch,
    // the experts' grouped products, the weighted combine; with `out` the residual dropout and
    // the residual (as mlp_forward); `stats`: add this layer's load-balancing statistics
    void moe_forward(const T* p, int l, int set, T* out, bool stats);
    // d(MLP output) `dr` (B*T, C) -> DLn = d(ln2) (both the experts' and the router's paths);
    // the router's and experts' grads added into g (with the load-balancing loss's term)
    void moe_backward(const T* p, float* g, int set, const T* dr);
    kernels::GroupedShape moe_shape(int set, int C, int OC) const;
    // the forward's balance loss and z from the pooled statistics (host values), and the loss
    // terms that join the cross-entropy: coef x balance when it is on, z coef x z
    double moe_losses();
    // residual dropout of rows [r0, r0+n) of the B*T rows (x: row r0), block l, one branch:
    // out = x * keep / (1 - p) with the step's key (forward and backward: the same mask)
    bool resid_drop() const { return drop_on_ && resid_p_ > 0.0f; }
    void resid_dropout(T* out, const T* x, int l, kernels::DropoutTag tag, int r0, int n);
    // the attention arguments of block l over the local (P = 1) or head-exchanged layout
    kernels::AttnArgs<T> attn_args(int l, const T* q, const T* k, const T* v, size_t ldq,
                                   size_t ldkv, size_t ldo, int T_, int heads, int kv_heads,
                                   int head0, int q_begin);
    const float* sinks_f32(const T* p); // block p's sinks as fp32 (a cast into Act::Sinks: bf16)
    // the LM head + loss: forward of every tile (losses, stats), backward of every tile (dlnf
    // rows into DLn, head grads added into ghead)
    void head_forward(const T* pf, const T* head, const int* targets);
    void head_backward(const T* pf, float* gf, const T* head, float* ghead, float dloss);
    void final_norm(const T* pf, int r0, int n); // rows [r0, r0+n) of res[L] into Lnf (row 0)
    // RoPE cos/sin rows: positions base, base+1, .. (max_T rows); or positions[0..n) (packed)
    void rope_tables(int base);
    void rope_rows(const int* positions, int n);
    template <class F> void rope_fill(size_t rows, F position_of);
    // offloaded checkpoints: res[l] to host memory (forward), its slot ready again (forward:
    // before a block writes over res[l-2]), res[l] back ahead of block l's backward
    void save_checkpoint(int l);
    void slot_free(int l);
    void checkpoint_ready(int l);
    void after_compute(device::Stream& s); // s waits for the compute work enqueued so far
    void compute_waits(device::Event& e);  // the compute work after this waits for e
    void attention_forward(const T* p, int l, int set);
    void attention_backward(const T* p, float* g, int l, int set);
    // n rows (-1: all B*T)
    void norm_forward(T* out, float* mean, float* rstd, const T* in, const T* w, const T* b,
                      int n = -1);
    void norm_backward(T* dinp, float* gw, float* gb, const T* dout, const T* in, const T* w,
                       const float* mean, const float* rstd, int n = -1);
    // Ulysses exchange of act buffers on the device (SeqExchange, elem = sizeof(T))
    void to_heads(const T* in, T* out, int K, int X);
    void to_tokens(const T* in, T* out, int K, int X);
    void upload(void* dst, const void* src, size_t bytes);
    // token ids and their positions (N each) into Act::Tokens / Act::Positions, targets when given
    void upload_ids(const int* targets, const int* segments, int N, size_t nseg);
    void sync();

    T* act(Act id, int set = -1) const { return static_cast<T*>(ptr(id, set)); }
    float* f32(Act id, int set = -1) const { return static_cast<float*>(ptr(id, set)); }
    int* i32(Act id, int set = -1) const { return static_cast<int*>(ptr(id, set)); }
    // (B, P*T) document ids of the last forward's batch, or null (one document per row)
    const int* segments() const { return packed_ ? i32(Act::Segments) : nullptr; }
    void* ptr(Act id, int set) const;
    T* res_at(int l) const {
        const int slot = !offload_ || l < kept_ ? l : kept_ + (l - kept_) % 2;
        return act(Act::Res) + static_cast<size_t>(slot) * max_BT_ * s_.C;
    }
    T* host_at(int l) const {
        return act(Act::ResHost) + static_cast<size_t>(l - kept_) * max_BT_ * s_.C;
    }
    int set_of(int l) const { return recompute_ ? 0 : l; }

    BlockSpec s_;
    UnitOffsets off_;
    SeqExchange* seq_ = nullptr;
    int P_ = 1, sp_index_ = 0;
    bool recompute_ = false;
    kernels::AttnKernel attn_kernel_ = kernels::AttnKernel::Auto; // ModelOptions::attention_kernel
    int max_B_ = 0, max_T_ = 0;
    size_t max_BT_ = 0;
    int B_ = 0, T_ = 0;
    bool have_targets_ = false;
    bool packed_ = false; // the last forward had segments (Act::Segments holds them)
    // decode: the block buffers' rows r0_.. are this call's (rows before: the KV cache in Qkv);
    // 0 in training. cached_: positions whose keys/values are in the cache.
    size_t r0_ = 0;
    int cached_ = 0;
    int scratch_layer_ = -1; // recompute: the block whose activations are in set 0 now
    // training dropout (set_dropout): on, the step's key, the rates (ModelOptions)
    bool drop_on_ = false;
    DropoutStep drop_;
    float attn_p_ = 0.0f, resid_p_ = 0.0f;
    // mixture of experts: the plan's offsets on the host per block set ((E+1) each), whether the
    // forward pools the load-balancing statistics, the loss's scale in the last backward, the
    // last training forward's balance loss and z (unscaled)
    std::vector<std::vector<int>> moe_host_off_;
    bool moe_sparse_ = false; // a layer is sparse (E > 0 and not every layer in mlp_only_layers)
    bool moe_stats_ = false;
    bool moe_aux_on_ = false; // output_router_logits: coef x balance joins the loss
    float moe_coef_ = 0.0f;   // router_aux_loss_coef
    float moe_z_coef_ = 0.0f; // ModelOptions::router_z_loss_coef (0: off)
    float dloss_ = 0.0f;
    double moe_balance_ = 0.0, moe_z_ = 0.0;
    int loss_rows_ = 0; // rows per LM head + loss tile (max_BT_: untiled)
    int mlp_rows_ = 0;  // rows per MLP tile (max_BT_: untiled)
    bool mlp_tiled_ = false;

    // offloaded checkpoints: res[K..L-2] go to host memory on d2h_ during forward and come back
    // on h2d_ one block ahead in backward; out_done_[l] / in_done_[l]: those copies of res[l];
    // res[0..K-1] stay in device slots of their own
    bool offload_ = false;
    int kept_ = 0; // K
    std::unique_ptr<device::Stream> d2h_, h2d_;
    std::vector<std::unique_ptr<device::Event>> out_done_, in_done_;
    std::unique_ptr<device::Event> compute_ev_;
    int ready_layer_ = -1;        // backward: the block whose input checkpoint_ready() last secured
    std::vector<float> rope_inv_; // (hd/2) RoPE inverse frequencies
    float rope_scale_ = 1.0f;     // YaRN's attention factor on cos and sin (1 otherwise)
    int rope_base_ = -1;          // the position of the RoPE tables' first row

    std::unique_ptr<device::Device> owned_dev_; // when ModelOptions::device is null
    device::Device* dev_ = nullptr;
    device::Stream* stream_ = nullptr;
    bool host_mem_ = true; // the ops run on the CPU twins over host-accessible buffers
    std::unique_ptr<kernels::cuda::Blas> blas_;
    // CUDA: the ops' scratch on stream_, reserved once for max_BT_ rows (never grown by an op)
    std::unique_ptr<kernels::Scratch> scratch_;
    kernels::Exec ex_;

    std::array<std::vector<void*>, static_cast<size_t>(Act::kCount)> bufs_; // [id][set or 0]
    std::vector<void*> allocs_, pinned_allocs_;
    size_t act_bytes_ = 0;
    std::vector<int> h_tokens_, h_targets_, h_positions_; // (max_BT) host copies
    int* pinned_ids_ = nullptr;      // ((3+P)*max_BT) CUDA upload staging (tokens, positions,
                                     // targets, segments)
    float* pinned_losses_ = nullptr; // (max_BT) CUDA loss readback
};

} // namespace sof::model
