// GPT-2 on the CPU (llm.c math): LayerNorm, learned positions, GELU MLP, tied LM head.
// One implementation of the Model seam (model.h); kernels in kernels_cpu.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/model.h"

namespace sof::model {

class GPT2 : public Model {
  public:
    GPT2(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T);
    ~GPT2() override;
    GPT2(const GPT2&) = delete;
    GPT2& operator=(const GPT2&) = delete;

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

} // namespace sof::model
