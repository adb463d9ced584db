// The planner's cost model (internal to lib/plan): model sizes and FLOPs, device-memory estimates
// and the per-schedule iteration-time simulation over a hardware profile.
#pragma once

#include "config/config.h"
#include "model/layout.h"
#include "plan/planner.h"

namespace sof::plan {

// Everything about one step that the cost functions need, derived once from deck + model + hw.
struct CostInputs {
    // model
    double params = 0;       // P, all parameters
    double layer_params = 0; // one transformer block
    double embed_params = 0; // wte + wpe (the largest unit)
    int layers = 0;          // L
    // step
    double batch = 0, seq = 0; // B, T per rank (T / parallel.sp with Ulysses)
    int grad_accum = 1;
    double weight_bytes = 2;     // working precision on the device (2 = bf16, 4 = fp32)
    double grad_move_bytes = 4;  // bytes per param moved D2H (cast=device: fp32; host: bf16)
    double param_move_bytes = 4; // bytes per param moved H2D (idem)
    bool stv = true;
    int prefetch_layers = 1;
    // GPU compute for one micro-batch, seconds
    double fwd_s = 0;            // forward (GEMMs + attention) at the achievable peak
    double bwd_s = 0;            // backward (2x forward, +1x forward with recompute)
    double activation_bytes = 0; // saved activations + logits of one micro-batch
    // buckets
    double bucket_params = 0; // deck bucket size in fp32 params
    int num_buckets = 1;
    double capacity_bytes = 0; // usable device memory
};

CostInputs make_cost_inputs(const config::Config& cfg, const model::GPT2Config& model,
                            const HardwareProfile& hw);

// Device memory of the SuperOffload engine with `weights` (Stationary or Flow) and n tail buckets.
MemoryEstimate offload_memory(const CostInputs& c, config::WeightsPolicy weights, int tail);
// Device memory with everything on the device (no offload): weights, grads, fp32 state,
// activations.
double gpu_only_memory(const CostInputs& c);

// Forward and backward time of one step (all micro-batches) with `weights`; with Flow the
// per-layer fetches overlap compute and only the excess plus the first fetch is exposed.
void pass_times(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                double* forward, double* backward, double* weight_transfer);

// SuperOffload (Eq. 7 with n tail buckets; stv=false waits for all grads first) and
// synchronous ZeRO-Offload (Eq. 6): bucket pipeline D2H -> CPU step -> H2D over the last backward.
IterationTimes superoffload_times(const CostInputs& c, const HardwareProfile& hw,
                                  config::WeightsPolicy weights, int tail, bool stv);
IterationTimes synchronous_times(const CostInputs& c, const HardwareProfile& hw,
                                 config::WeightsPolicy weights);
// Deep Optimizer States: update phase after backward, every k-th subgroup on the device.
IterationTimes interleaved_times(const CostInputs& c, const HardwareProfile& hw,
                                 config::WeightsPolicy weights, int k);
// No offload: everything on the device, device optimizer after backward.
IterationTimes gpu_only_times(const CostInputs& c, const HardwareProfile& hw);

// Paper Eq. 4-5 generalized to the whole CPU pipeline: true when every CPU bucket is stepped and
// back on the device by the time backward and the n tail buckets' device step are done.
bool tail_hides_cpu(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                    int tail);

} // namespace sof::plan
