// Internal to model/: the transformer driver for one activation dtype T (float on the CPU twins;
// float or bf16 on CUDA): its buffers, the per-block forward/backward and the Ulysses exchange.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "kernels/exec.h"
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
    virtual void backward(WeightSource& w, GradSink& sink, float dloss) = 0;
    virtual std::vector<float> logits() const = 0;
    virtual size_t activation_bytes() const = 0;
};

template <class T> class DriverT : public Transformer::Driver {
  public:
    DriverT(const ArchConfig& cfg, const ParamLayout& layout, const ModelOptions& opts, int max_B,
            int max_T);
    ~DriverT() override;
    float forward(WeightSource& w, const int* inputs, const int* targets, const int* segments,
                  int B, int Tl) override;
    void decode(WeightSource& w, const int* tokens, int n, int pos0) override;
    void backward(WeightSource& w, GradSink& sink, float dloss) override;
    std::vector<float> logits() const override;
    size_t activation_bytes() const override { return act_bytes_; }

  private:
    // block l's parameters / grads start at the unit's start; `set`: the activation set of l
    void block_forward(const T* p, int set, const T* in, T* out, bool output);
    void block_backward(const T* p, float* g, int set, const T* in);
    void attention_forward(int set);
    void attention_backward(int set);
    void norm_forward(T* out, float* mean, float* rstd, const T* in, const T* w, const T* b);
    void norm_backward(T* dinp, float* gw, float* gb, const T* dout, const T* in, const T* w,
                       const float* mean, const float* rstd);
    // Ulysses exchange of act buffers (host float buffers passed through; otherwise staged)
    void to_heads(const T* in, T* out, int K, int X);
    void to_tokens(const T* in, T* out, int K, int X);
    void upload(void* dst, const void* src, size_t bytes);
    // token ids and their positions (N each) into Act::Tokens / Act::Positions, targets when given
    void upload_ids(const int* targets, const int* segments, int N, size_t nseg);
    void sync();

    T* act(Act id, int set = -1) const { return static_cast<T*>(ptr(id, set)); }
    float* f32(Act id, int set = -1) const { return static_cast<float*>(ptr(id, set)); }
    int* i32(Act id) const { return static_cast<int*>(ptr(id, -1)); }
    // (B, P*T) document ids of the last forward's batch, or null (one document per row)
    const int* segments() const { return packed_ ? i32(Act::Segments) : nullptr; }
    void* ptr(Act id, int set) const;
    T* res_at(int l) const { return act(Act::Res) + static_cast<size_t>(l) * max_BT_ * s_.C; }
    int set_of(int l) const { return recompute_ ? 0 : l; }

    BlockSpec s_;
    UnitOffsets off_;
    SeqExchange* seq_ = nullptr;
    int P_ = 1, sp_index_ = 0;
    bool recompute_ = false;
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

    std::unique_ptr<device::Device> owned_dev_; // when ModelOptions::device is null
    device::Device* dev_ = nullptr;
    device::Stream* stream_ = nullptr;
    bool host_mem_ = true; // the ops run on the CPU twins over host-accessible buffers
    std::unique_ptr<kernels::cuda::Blas> blas_;
    kernels::Exec ex_;

    std::array<std::vector<void*>, static_cast<size_t>(Act::kCount)> bufs_; // [id][set or 0]
    std::vector<void*> allocs_;
    size_t act_bytes_ = 0;
    std::vector<int> h_tokens_, h_targets_, h_positions_; // (max_BT) host copies
    int* pinned_ids_ = nullptr;      // ((3+P)*max_BT) CUDA upload staging (tokens, positions,
                                     // targets, segments)
    float* pinned_losses_ = nullptr; // (max_BT) CUDA loss readback
    std::vector<float> xa_, xb_;     // Ulysses staging (CUDA / bf16)
};

} // namespace sof::model
