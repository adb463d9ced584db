// The one transformer driver: GPT-2 and the LLaMA family are the block description (block_spec.h)
// run by the same forward/backward through the kernel seam (lib/kernels).
#pragma once

#include <memory>

#include "model/model.h"

namespace sof::model {

// Activations are buffers of the Device in ModelOptions (one list: activations.h); the ops run
// on the CPU twins (host device: on the calling thread) or the CUDA twins (cuda device: on
// ModelOptions::stream). Not thread-safe.
class Transformer : public Model {
  public:
    // Throws Config errors for bad sizes or options (heads not divisible by the Ulysses degree,
    // T beyond max_seq_len), Runtime when the activations do not fit the device.
    Transformer(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T);
    ~Transformer() override;

    const ArchConfig& config() const override { return cfg_; }
    const ParamLayout& layout() const override { return layout_; }
    using Model::forward;
    float forward(WeightSource& w, const int* inputs, const int* targets, const int* segments,
                  int B, int T) override;
    void decode(WeightSource& w, const int* tokens, int n, int pos0) override;
    void set_dropout(const DropoutStep* s) override;
    void backward(WeightSource& w, GradSink& sink, float dloss) override;
    std::vector<float> logits() const override;
    size_t activation_bytes() const override;
    RouterLosses router_losses() const override;

    class Driver; // the dtype-specific implementation (transformer_impl.h)

  private:
    ArchConfig cfg_;
    ParamLayout layout_;
    std::unique_ptr<Driver> impl_;
};

} // namespace sof::model
