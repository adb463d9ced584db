// The update path seen by the training loop: where forward reads weights, where backward puts
// grads, and what happens at the end of an optimizer step. Implemented by the plain path
// (plain.h: everything resident, synchronous step) and by the SuperOffload engine (engine.h).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "offload/state_layout.h"

namespace sof::offload {

struct StepHparams {
    int64_t step = 0; // 0-based iteration index of the training loop
    float lr = 0.0f;
    float grad_clip = 0.0f;        // 0 = no clipping
    bool inject_nonfinite = false; // debug: set lnfw's first grad to NaN at unit_done(L+1)
};

// Bytes the update path moved over the CPU<->device link, by direction and kind: grads (offloaded
// D2H), params (working weights H2D after a host step, weight-flow fetches, device-stepped weights
// written back to host memory in weight flow), state (fp32 params + moments streamed to and from
// the device by the interleaved schedule). The plain path moves nothing.
struct TransferBytes {
    int64_t grads_d2h = 0;
    int64_t params_h2d = 0;
    int64_t params_d2h = 0;
    int64_t state_h2d = 0;
    int64_t state_d2h = 0;
    int64_t h2d() const { return params_h2d + state_h2d; }
    int64_t d2h() const { return grads_d2h + params_d2h + state_d2h; }
    TransferBytes& operator+=(const TransferBytes& o) {
        grads_d2h += o.grads_d2h;
        params_h2d += o.params_h2d;
        params_d2h += o.params_d2h;
        state_h2d += o.state_h2d;
        state_d2h += o.state_d2h;
        return *this;
    }
};

struct StepReport {
    double grad_norm = 0.0;   // global L2 norm of the grads (fp64), before clipping
    bool skipped = false;     // non-finite grads: no update this step
    bool clipped = false;     // norm > clip: grads scaled by clip/(norm+1e-6)
    bool rolled_back = false; // speculative updates were undone (skip or clip under STV)
    // time split of this step, ms
    double forward_ms = 0, backward_ms = 0, exposed_optimizer_ms = 0, exposed_transfer_ms = 0;
    TransferBytes bytes; // moved for this step (enqueued between begin_step and finish_step)
};

// Combines this rank's grad statistics with the other ranks' when each rank holds a shard of the
// grads (ZeRO-3). Implementations must give every rank the same bits (rank-order sums).
class StatReducer {
  public:
    virtual ~StatReducer() = default;
    // sumsq: this rank's sum of squares in, the global one out; nonfinite likewise (any rank).
    // collective: all ranks holding shards
    virtual void combine(double* sumsq, bool* nonfinite) = 0;
};

// Counters since construction (or checkpoint restore).
struct UpdaterStats {
    int64_t commits = 0; // steps whose update was applied (speculative or not, after any rerun)
    int64_t skips = 0;
    int64_t rollbacks = 0;
    int64_t reruns = 0;  // bucket re-executions with clipped grads
    TransferBytes bytes; // link traffic in total
};

class Updater {
  public:
    virtual ~Updater() = default;

    virtual model::WeightSource& weights() = 0;
    virtual model::GradSink& grads() = 0;

    // Before the first micro-batch of an optimizer step (zeroes grads).
    virtual void begin_step(const StepHparams& hp) = 0;
    // Before each micro-batch's backward; `last` is true for the final one of the step (the engine
    // offloads and speculatively steps only then).
    virtual void begin_micro(int micro, bool last) = 0;
    // After the last micro-batch's backward: validate, then commit / skip / roll back and re-run.
    // When it returns, weights() is ready for the next forward (or will be fetched on demand).
    virtual StepReport finish_step() = 0;

    virtual const UpdaterStats& stats() const = 0;

    // What weights().acquire hands out: bf16 values (the model built with bf16 weights reads
    // them so) or fp32. Fixed at construction.
    virtual bool bf16_weights() const { return false; }

    // The grads this path sees are one rank's shard: finish_step combines the statistics through
    // r before validating (null: the grads are the whole model's).
    void set_stat_reducer(StatReducer* r) { stat_reducer_ = r; }

    // Host fp32 copies of the master state, each (num_params), in ParamLayout order.
    // opt_step: number of optimizer updates taken so far (bias correction uses opt_step+1).
    virtual void get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) = 0;
    virtual void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                           int64_t opt_step) = 0;
    // The state's formats, and the state as kept (master params and moment slots raw, q8 codes
    // with their scales, state_layout.h NativeState over this path's layout): what checkpoints of
    // native formats (bf16 master, q8 moments) save and load as they are. ns->format is set by
    // get_native; set_native requires format == state_format().
    virtual StateFormat state_format() const { return StateFormat{}; }
    virtual void get_native(NativeState* ns);
    virtual void set_native(const NativeState& ns);

  protected:
    StatReducer* stat_reducer_ = nullptr;
};

} // namespace sof::offload
