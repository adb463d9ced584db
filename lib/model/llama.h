// The LLaMA family on the CPU (llama, qwen2, qwen3): RMSNorm, rotary embeddings (with Llama-3
// scaling), grouped-query attention, SwiGLU, optional q/k/v biases and qk-norm, tied or untied
// head.
#pragma once

#include <vector>

#include "model/model.h"

namespace sof::model {

class Llama : public Model {
  public:
    Llama(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T);
    ~Llama() override;
    Llama(const Llama&) = delete;
    Llama& operator=(const Llama&) = delete;

    const ArchConfig& config() const override { return cfg_; }
    const ParamLayout& layout() const override { return layout_; }
    float forward(WeightSource& w, const int* inputs, const int* targets, int B, int T) override;
    void backward(WeightSource& w, GradSink& sink, float dloss) override;
    const float* logits() const override;
    const float* probs() const override;

  private:
    struct Impl;
    ArchConfig cfg_;
    ParamLayout layout_;
    Impl* impl_;
};

// The rotary inverse frequencies (hd/2) of cfg: theta^(-2i/hd), then Llama-3 scaling when set.
// Computed in double and rounded once to float.
std::vector<float> rope_inv_freq(const ArchConfig& cfg);

} // namespace sof::model
