// The plain update path (offload.enabled: false): params, grads and Adam state in host vectors,
// a synchronous step after backward: global norm, skip on non-finite, clip, AdamW via the plugin.
// With bf16 and offload.cast: host the grads are rounded to bf16 first, as the engine moves them.
#pragma once

#include <memory>
#include <vector>

#include "config/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "model/model.h"
#include "offload/state_layout.h"
#include "offload/updater.h"
#include "optim/optimizer.h"

namespace sof::offload {

class PlainUpdater : public Updater {
  public:
    PlainUpdater(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
                 core::Trace* trace);
    ~PlainUpdater() override;

    model::WeightSource& weights() override { return *weights_; }
    model::GradSink& grads() override;
    void begin_step(const StepHparams& hp) override;
    void begin_micro(int micro, bool last) override;
    StepReport finish_step() override;
    const UpdaterStats& stats() const override { return stats_; }
    void get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) override;
    void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                   int64_t opt_step) override;
    StateFormat state_format() const override { return fmt_; }
    void get_native(NativeState* ns) override;
    void set_native(const NativeState& ns) override;

  private:
    class Sink;
    void refresh_working(); // work_ = bf16-rounded params_ (dtype bf16)

    config::Config cfg_;
    const model::ParamLayout& layout_;
    core::Log log_;
    core::Trace* trace_;
    int lane_ = 0;
    bool bf16_;
    bool bf16_grads_; // bf16 with offload.cast host: grads rounded to bf16 (as the engine moves
                      // them)
    std::vector<float> params_;      // (num_params) fp32 master (bf16 master: unused)
    std::vector<uint16_t> params16_; // (num_params) bf16 master (optimizer.master_dtype bf16)
    std::vector<float> grads_;       // (num_params)
    StateFormat fmt_;                // optimizer.master_dtype, state_dtype, state_block
    StateBlocks blocks_;             // q8: the blocks of the layout
    size_t es_ = 4;                  // bytes per moment (q8: per code)
    std::vector<char> m_, v_;        // exp_avg, exp_avg_sq slot buffers (state_layout.h)
    std::vector<float> work_;        // (num_params) bf16-rounded params (dtype bf16 only)
    std::vector<uint16_t> lowp_;     // (num_params) bf16 copy written by the step (dtype bf16)
    std::vector<uint16_t> grads16_;  // (num_params) bf16-rounded grads (bf16_grads_ only)
    std::vector<int64_t> pieces_;    // stat piece bounds (common.h)
    std::unique_ptr<model::FlatWeights> weights_;
    std::unique_ptr<Sink> sink_;
    std::unique_ptr<optim::Optimizer> opt_;
    StepHparams hp_;
    int64_t opt_step_ = 0;
    UpdaterStats stats_;
};

} // namespace sof::offload
