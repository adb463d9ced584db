// The training loop: deck -> model, data, update path (plain or SuperOffload engine), then steps
// with accumulation, clipping, LR schedule, eval, step log, JSONL metrics and checkpoints.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/group.h"
#include "comm/world.h"
#include "config/config.h"
#include "core/log.h"
#include "train/stop.h"
#include "offload/updater.h"

namespace sof::train {

// Wall time of one step and its split (ms), as the step log prints it.
// One step's wall time and its split: forward/backward are device time on the compute stream
// (timing events around each micro-batch, summed), the exposed parts host time waited in
// finish_step.
struct StepTimes {
    double ms = 0, forward_ms = 0, backward_ms = 0, exposed_optimizer_ms = 0,
           exposed_transfer_ms = 0;
};

struct RunSummary {
    float first_val_loss = 0.0f;       // eval before the first step (of this run)
    float last_val_loss = 0.0f;        // eval after the last step
    std::vector<float> train_losses;   // (steps run) mean loss over the step's micro-batches
    std::vector<float> grad_norms;     // (steps run) global grad norm before clipping (non-finite
                                       // for skipped steps)
    std::vector<StepTimes> step_times; // (steps run)
    int64_t start_step = 0;            // first step run (> 0 after resume)
    int64_t end_step = 0;              // steps completed in total
    double tokens_per_s = 0.0;         // mean over the run (steps after the first)
    int64_t skips = 0, rollbacks = 0;  // since the first step (they go on across resumes)
    int64_t commits = 0;               // steps applied since the first step (end_step - skips)
    offload::TransferBytes bytes;      // link traffic of the update path in this run
    double entropy_floor = 0.0;        // nats/token of the built-in data (NaN for shards)
    std::string last_checkpoint;       // directory of the last checkpoint written ("" if none)
    std::vector<comm::CommBytes> comm_bytes; // (steps run) this rank's collective bytes
    double comm_ms = 0, comm_wait_ms = 0;    // comm lane busy time, main thread blocked on it
    size_t device_peak = 0, device_used = 0; // the rank device's accounting at the end (bytes)
    bool stopped = false; // ended early on a stop request (a signal), after a whole step
    int stop_signal = 0;  // the signal this rank got (0: another rank's, or none)
    // every step of this run was skipped (non-finite loss or grads: nothing was trained; the app
    // exits non-zero). The same on every rank (skips are decided from the global grad norm).
    bool all_skipped = false;
};

// One pass of `superoffload eval` (Trainer::evaluate).
struct EvalResult {
    double loss = 0.0;         // mean cross-entropy over the counted targets (nats/token)
    double perplexity = 0.0;   // exp(loss)
    int64_t batches = 0;       // global validation batches read (each once)
    double tokens = 0.0;       // counted targets over all ranks (masked ones left out)
    double seconds = 0.0;      // wall time of the pass (forward passes and the loss reduction)
    double tokens_per_s = 0.0; // input tokens of all ranks per second (B*T*batches*dp / seconds)
};

class Trainer {
  public:
    // cfg must come from config::load_deck (validated, padded vocab resolved).
    // Builds the rank context (binding, device, groups), the model, the data and the update path.
    // collective: all ranks of world
    Trainer(const config::Config& cfg, const comm::World& world, const core::Log& log);
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // Asked once per step, after the step (and its checkpoint, if due): when any rank's check
    // returns non-zero, run() writes a checkpoint (when train.checkpoint_dir is set), a "stop"
    // metrics record, and returns with summary.stopped (no final evaluation).
    void set_stop_check(StopCheck check);

    // collective: all ranks of world
    RunSummary run();

    // Replaces the params with those of a checkpoint step directory (any shard count; optimizer
    // state and data position are not read): `superoffload eval` of a checkpoint.
    // collective: all ranks of world
    void load_weights(const std::string& step_dir);

    // The validation loss of the current weights over `batches` validation batches from the
    // first (0: every batch of the split once). More than the split holds is clamped to it with
    // a warning (no wrap-around). collective: all ranks of world
    EvalResult evaluate(int batches);

    // The fp32 master params (num_params, flat layout order) as they are now.
    // collective: all ranks of world (ZeRO-3 gathers the shards)
    std::vector<float> params() const;

    // The model's architecture (the deck's, or the one init_from read).
    const model::ArchConfig& model_config() const;

    // debug.fail_hard: what kills this process at debug.fail_step (the app passes a function that
    // ends it like a crash; without one the failing rank throws).
    void set_crash_hook(std::function<void()> crash);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace sof::train
