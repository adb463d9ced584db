// The model seam: every architecture (GPT-2, LLaMA family) implements Model over the same
// WeightSource/GradSink unit protocol, so the offload engine and ZeRO never see the architecture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "model/layout.h"

namespace sof::device {
class Device;
class Stream;
} // namespace sof::device

namespace sof::model {

enum class Pass { Forward, Backward };

// Supplies fp32 params of one unit (see layout.h: unit 0 = embeddings, 1..L = blocks, L+1 = final
// LN). The returned pointer addresses the unit's first tensor; tensors follow at their flat offsets
// relative to unit_begin(u). Valid until release(u, pass).
class WeightSource {
  public:
    virtual ~WeightSource() = default;
    virtual const float* acquire(int unit, Pass pass) = 0;
    virtual void release(int unit, Pass pass) { (void)unit, (void)pass; }
};

// Receives grads. The model ADDS into grads(u) (the sink zeroes when it wants to) and calls
// unit_done(u) once every grad of unit u is final for this backward. Order of unit_done:
// L+1, L, ..., 1, 0 (unit 0 last: the tied wte gets grads from the LM head and the embedding).
class GradSink {
  public:
    virtual ~GradSink() = default;
    virtual float* grads(int unit) = 0;
    virtual void unit_done(int unit) { (void)unit; }
};

// Plain flat buffers: acquire/grads return pointers into one (num_params) array.
class FlatWeights : public WeightSource {
  public:
    FlatWeights(const ParamLayout& layout, const float* params)
        : layout_(layout), params_(params) {}
    const float* acquire(int unit, Pass) override { return params_ + layout_.unit_begin[unit]; }

  private:
    const ParamLayout& layout_;
    const float* params_;
};

class FlatGrads : public GradSink {
  public:
    FlatGrads(const ParamLayout& layout, float* grads) : layout_(layout), grads_(grads) {}
    float* grads(int unit) override { return grads_ + layout_.unit_begin[unit]; }

  private:
    const ParamLayout& layout_;
    float* grads_;
};

// Ulysses sequence parallelism as the model sees it; implemented by sp/ (the model never includes
// parallel code). P ranks each hold Tl = T/P consecutive positions of every sequence: rank i holds
// positions [i*Tl, (i+1)*Tl). Around attention the model trades its token slice of all heads for
// all tokens of its NH/P heads. Channel groups: the C channels of q (and of k, v, and of the
// attention output) split into P groups of X = C/P, group j = heads [j*NH/P, (j+1)*NH/P).
class SeqExchange {
  public:
    virtual ~SeqExchange() = default;
    virtual int degree() const = 0; // P
    virtual int index() const = 0;  // i: this rank's token slice
    // Buffers of the model's device, `elem` bytes per element (4: fp32, 2: bf16), in, out and
    // recv not overlapping; recv (P*B*Tl*K*X elements) receives the chunks (the model's buffer,
    // so its memory is in the activation list). The exchange follows the work the model enqueued
    // on its stream and its result is ready for the work enqueued after it (on the host device:
    // when the call returns).
    // in (B, Tl, K, P, X) -> out (B, P*Tl, K, X): every token of channel group i (K = 2 for kv,
    // 1 for q and the attention output). collective: all ranks of the sequence-parallel group
    virtual void to_heads(const void* in, void* out, void* recv, size_t elem, int B, int Tl, int K,
                          int X) = 0;
    // The inverse: in (B, P*Tl, K, X) -> out (B, Tl, K, P, X).
    // collective: all ranks of the sequence-parallel group
    virtual void to_tokens(const void* in, void* out, void* recv, size_t elem, int B, int Tl, int K,
                           int X) = 0;
};

struct ModelOptions {
    bool recompute = false;     // keep only each block's input; recompute the block in backward
    SeqExchange* seq = nullptr; // Ulysses hook (null or degree 1: the whole sequence is here)
    // Where the activations live and the ops run: the rank's device and its compute stream. Null:
    // the model makes a host device of its own (CPU twins, no capacity limit that matters).
    device::Device* device = nullptr;
    device::Stream* stream = nullptr;
    bool bf16 = false; // bf16 activations (CUDA devices; the CPU twins keep fp32 activations)
    // Long sequences (docs/model.md "Long sequences"): rows per LM head + loss tile and per MLP
    // tile (-1 auto, 0 untiled, N tokens; activations.h), and the block inputs saved for
    // recompute kept in pinned host memory (needs recompute).
    int loss_tile = -1;
    int mlp_tile = -1;
    bool offload_checkpoints = false;
    int device_checkpoints = 0; // with offload_checkpoints: the first N block inputs stay here
    // The CUDA attention kernel (debug.attention_kernel; the CPU twins have one kernel)
    kernels::AttnKernel attention_kernel = kernels::AttnKernel::Auto;
    // Training dropout rates (model.attention_dropout / residual_dropout resolved: the deck's or
    // the model's); applied only by forwards after a set_dropout with a step, never in decode
    float attn_dropout = 0.0f;  // attention probabilities
    float resid_dropout = 0.0f; // each block branch before its residual add
    // Mixture of experts: the router z-loss's weight (model.router_z_loss_coef; docs/moe.md):
    // > 0 adds coef x z (moe_aux.h) to the training loss; a model without experts refuses it
    float router_z_loss_coef = 0.0f;
};

// Mixture of experts: the router's auxiliary losses of the last forward with targets, unscaled
// (kernels/moe_aux.h: pooled over its sparse layers), whether or not they join the loss; moe =
// false for a model without experts (then both are 0).
struct RouterLosses {
    bool moe = false;
    double balance = 0.0; // transformers' load_balancing_loss_func (x router_aux_loss_coef)
    double z = 0.0;       // mean over layers and tokens of logsumexp(logits)^2 (x z coef)
};

// The key of the training dropout masks of the next forwards and their backward (and recompute):
// the run's seed, the optimizer step and the global batch row of this rank's row 0 within the
// step's global batch (every micro-step of a step numbers its rows there, so the bits do not
// depend on the rank count, the accumulation split or Ulysses, and a resumed step draws the
// same). The layer, the purpose and the element's global position complete the key
// (kernels/dropout.h).
struct DropoutStep {
    uint64_t seed = 0;
    uint32_t step = 0;
    uint64_t batch0 = 0;
};

// One architecture's forward/backward state for micro-batches up to (max_B, max_T). Activations
// are device buffers (the Device of ModelOptions). Not thread-safe.
// Unit protocol (all architectures): forward acquires units 0, 1, ..., L+1 in order; backward
// acquires 0 (only when the LM head is tied to the embedding, held to the end), then L+1, L, ...,
// 1, and calls unit_done(L+1), ..., unit_done(1), unit_done(0).
class Model {
  public:
    virtual ~Model() = default;
    virtual const ArchConfig& config() const = 0;
    virtual const ParamLayout& layout() const = 0;

    // inputs, targets: (B, T) token ids in host memory; targets may be null (then no loss,
    // returns 0). A target of -1 is ignored (a masked position: loss 0, gradient 0). Returns the
    // mean cross-entropy over the B*T positions whose target is not -1 (0 if none). With a
    // SeqExchange of degree P, T is the local slice Tl (positions index*Tl ..) and the loss is the
    // mean over the local positions.
    float forward(WeightSource& w, const int* inputs, const int* targets, int B, int T) {
        return forward(w, inputs, targets, nullptr, B, T);
    }
    // The same with packed documents (docs/data.md, "Packing"): segments (B, P*T) in host memory,
    // the document id of every position of the WHOLE sequence (every Ulysses rank passes all P
    // slices; ids need only differ between neighbouring documents), or null for one document per
    // row. Attention does not cross a document boundary and positions (RoPE angles, learned
    // position rows) restart at 0 at each document start: position t - (first t of its run).
    virtual float forward(WeightSource& w, const int* inputs, const int* targets,
                          const int* segments, int B, int T) = 0;

    // Incremental decoding with a KV cache, one sequence: runs the n tokens at positions
    // pos0..pos0+n-1 against the keys and values of positions 0..pos0-1 kept by the calls before
    // (pos0 = 0 starts a new sequence; pos0 may go back to re-run a suffix); pos0 + n <= max_T.
    // logits() then holds their (1, n, Vp) logits. Any max_B (one sequence's rows are used); not
    // with recompute or Ulysses (Config error). A forward in between drops the cache (pos0 must
    // be 0 again).
    virtual void decode(WeightSource& w, const int* tokens, int n, int pos0) = 0;

    // Dropout of the forwards from now on (ModelOptions' rates): `s` (copied) keys the masks;
    // null turns it off (evaluation; also the state of a new model).
    virtual void set_dropout(const DropoutStep* s) = 0;

    // After forward with targets. Every position's dloss is `dloss` (1/(B*T) for a mean loss,
    // divided by the accumulation count when accumulating). Adds into sink's grads.
    virtual void backward(WeightSource& w, GradSink& sink, float dloss) = 0;

    // (B, T, Vp) logits of the last forward, copied to host memory as fp32 (after a backward:
    // the dlogits). Throws when the LM head runs in tiles (only the last tile is kept).
    virtual std::vector<float> logits() const = 0;
    // Bytes of device memory the activation buffers take (activations.h's list, allocated).
    virtual size_t activation_bytes() const = 0;
    // The router's auxiliary losses of the last forward with targets (RouterLosses).
    virtual RouterLosses router_losses() const { return {}; }
};

// The architecture named by cfg.arch. Throws Config errors for bad sizes or options.
std::unique_ptr<Model> make_model(const ArchConfig& cfg, const ModelOptions& opts, int max_B,
                                  int max_T);

// Initialise params (num_params) like GPT-2, for every architecture: N(0, std) for matrices and
// embeddings, 1/0 for norms, 0 for biases, residual projections (attention out, MLP down) scaled
// by 1/sqrt(2L). Deterministic in `seed`.
void init_params(const ParamLayout& layout, float* params, float std, unsigned long long seed);

// Model FLOPs per token for forward+backward (6N + attention term), for MFU/TFLOPS reporting.
double flops_per_token(const ArchConfig& cfg, int T);
// Parameters of the L blocks: all of them (memory, transfers, the optimizer step) and those one
// token computes with (a sparse block's router and K of its E experts: the FLOPs).
struct BlockParams {
    double total = 0, active = 0;
};
BlockParams block_params(const ArchConfig& cfg);

} // namespace sof::model
