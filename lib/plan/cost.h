// The planner's cost model (internal to lib/plan): model sizes and FLOPs, device-memory estimates
// and the per-schedule iteration-time simulation over a hardware profile.
#pragma once

#include <vector>

#include "config/config.h"
#include "model/activations.h"
#include "model/layout.h"
#include "offload/memory_plan.h"
#include "plan/long_seq.h"
#include "plan/planner.h"

namespace sof::plan {

// The engine modes that change memory and link traffic, as the planner tries them (the deck's
// values, `auto` ones at their preferred setting until the planner resolves them).
struct EngineModes {
    bool cast_host =
        false;         // bf16 training: grads (and stationary's bf16 params) as bf16 on the link
    bool exact = true; // exact rollback: a second host state set
    sof_state_format moments = SOF_STATE_F32; // m, v: fp32, bf16 or q8
    sof_dtype master = SOF_DTYPE_F32;         // master params: fp32 or bf16
    bool ring_ok = true;   // weight flow may keep the model's grads in a device ring
    bool speculate = true; // the deck's schedule and stv speculate (exact needs two sets then)
};

// Everything about one step that the cost functions need, derived once from deck + model + hw.
struct CostInputs {
    // model
    double params = 0;        // P, all parameters
    double layer_params = 0;  // one transformer block (the blocks' mean: MoE models mix dense ones)
    double active_params = 0; // of the L blocks, those a token computes with (MoE: K of E experts)
    double embed_params = 0;  // unit 0: wte (+ wpe for GPT-2)
    double head_params = 0;   // last unit when it holds an untied LM head (lnf + lm_head), else 0
    int layers = 0;           // L
    // step
    double batch = 0, seq = 0; // B, T per rank (T / parallel.sp with Ulysses)
    int grad_accum = 1;
    double weight_bytes = 2;     // working precision on the device (2 = bf16, 4 = fp32)
    double grad_move_bytes = 4;  // bytes per param moved D2H (cast=device: fp32; host: bf16)
    double param_move_bytes = 4; // bytes per param moved H2D (idem)
    double fetch_bytes = 4;      // weight flow: bytes per param fetched (the fp32 master)
    EngineModes modes;           // apply_modes sets them with the move bytes and memory inputs
    bool flow_ring = false;      // weight flow keeps the grads in a device ring with these modes
    bool stv = true;
    int prefetch_layers = 1;
    // GPU compute for one micro-batch, seconds
    double fwd_s = 0;            // forward (GEMMs + attention) at the achievable peak
    double bwd_s = 0;            // backward (2x forward, +1x forward with recompute)
    double activation_bytes = 0; // saved activations + logits of one micro-batch
    // long sequences: offloaded checkpoints of one micro-batch (pinned host bytes, link time in
    // all and not hidden behind compute) and the backward work tiling adds
    LongSeqCost long_seq;
    // buckets
    double bucket_params = 0; // deck bucket size in fp32 params
    int num_buckets = 1;
    double capacity_bytes = 0;      // usable device memory
    double host_capacity_bytes = 0; // host memory of this rank
    bool host_device = true;        // the `host` device: its "device" memory is host memory too
    // the model reads bf16 weights (on a CUDA device in bf16: offload::bf16_working_weights):
    // the engine keeps bf16 working weights and the ZeRO-3 wrapper bf16 gather slots (its unit
    // slots are device memory)
    bool work_bf16 = false;
    int shard_ranks = 1;   // ZeRO-3 ranks the state is sharded over
    bool gather16 = false; // ZeRO-3 gathers bf16 weights (offload::Zero3Slots)
    int interleave_k = 0;  // schedule interleaved: the stride used for placement
    // The engine's memory plan inputs of rank 0 (buckets of the deck's bucket_mb, unplaced;
    // offload_memory places them for a weights policy / tail count / stride), and of the other
    // ZeRO-3 ranks the estimate takes the maximum over (all up to 64 ranks, then a sample of 64
    // spread over the job, the last included): their bucket cuts differ by a few KiB.
    offload::MemoryPlanInputs mem_base;
    std::vector<offload::MemoryPlanInputs> mem_other;
};

// Sets c's engine modes: the link bytes per param, the memory plan inputs of every rank and
// whether weight flow has a grad ring (flow_ring).
void apply_modes(CostInputs& c, const EngineModes& m);

// shard_ranks: ZeRO-3 ranks the parameters, grads and optimizer state are sharded over. On a GPU
// profile the model runs on the GPU: the engine's buffers are what the engine allocates there.
CostInputs make_cost_inputs(const config::Config& cfg, const model::ArchConfig& model,
                            const HardwareProfile& hw, int shard_ranks = 1);

// Memory of the SuperOffload engine with `weights` (Stationary or Flow), n tail buckets and, when
// interleave_k >= 1, every k-th other bucket streamed: the sums of the engine's memory plan
// (offload::make_memory_plan) on each side, plus the ZeRO-3 wrapper's slots
// (offload::zero3_memory_plan) and the activations on the device; under ZeRO-3 each figure is
// the largest over the ranks evaluated (mem_base, mem_other).
MemoryEstimate offload_memory(const CostInputs& c, config::WeightsPolicy weights, int tail,
                              int interleave_k = 0);
// Weight flow's memory with offload.flow_grads as the planner resolves it: the device ring, or,
// when the deck leaves it `auto` and the ring does not fit the device, the model's grads in pinned
// host memory (what the planner falls back to).
MemoryEstimate flow_memory(const CostInputs& c, const config::Config& cfg, int tail = 0,
                           int interleave_k = 0);
// The engine's memory plan inputs for that choice (what offload_memory sums).
offload::MemoryPlanInputs offload_plan_inputs(const CostInputs& c, config::WeightsPolicy weights,
                                              int tail, int interleave_k);
offload::MemoryPlanInputs offload_plan_inputs(const offload::MemoryPlanInputs& base,
                                              config::WeightsPolicy weights, int tail,
                                              int interleave_k);
// Device memory with everything on the device (no offload): weights, grads, fp32 state,
// activations.
double gpu_only_memory(const CostInputs& c);

// Bytes per parameter of one optimizer state set with c's modes: master, m and v (q8: the code
// + 4/block for the scale).
double state_set_bytes(const CostInputs& c);

// The CPU optimizer's throughput (params/s) with c's moments: the profile's figure for that
// format (cpu.adam_params_per_s_bf16 / _q8), else the fp32 one.
double cpu_adam_rate(const CostInputs& c, const HardwareProfile& hw);

// Forward and backward time of one step (all micro-batches) with `weights`; with Flow the
// per-layer fetches overlap compute and only the excess plus the first fetch is exposed.
void pass_times(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                double* forward, double* backward, double* weight_transfer);

// SuperOffload (Eq. 7 with n tail buckets; stv=false waits for all grads first) and
// synchronous ZeRO-Offload (Eq. 6): bucket pipeline D2H -> CPU step -> H2D over the last backward.
// with_memory: also decide `fits` from the memory plan (the planner's tail search skips it).
IterationTimes superoffload_times(const CostInputs& c, const HardwareProfile& hw,
                                  config::WeightsPolicy weights, int tail, bool stv,
                                  bool with_memory = true);
IterationTimes synchronous_times(const CostInputs& c, const HardwareProfile& hw,
                                 config::WeightsPolicy weights);
// Deep Optimizer States: update phase after backward, every k-th subgroup streamed to the device
// (memory: `tail` resident buckets plus the streaming slots).
IterationTimes interleaved_times(const CostInputs& c, const HardwareProfile& hw,
                                 config::WeightsPolicy weights, int k, int tail = 0);
// No offload: everything on the device, device optimizer after backward.
IterationTimes gpu_only_times(const CostInputs& c, const HardwareProfile& hw);

// Paper Eq. 4-5 generalized to the whole CPU pipeline: true when every CPU bucket is stepped and
// back on the device by the time backward and the n tail buckets' device step are done.
bool tail_hides_cpu(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                    int tail);
// The smallest tail count n in [from, to] for which tail_hides_cpu holds, else `to`: one pipeline
// pass serves every count (a scan calling tail_hides_cpu per count is quadratic in the buckets:
// 6,000 of them for a 100B model).
int first_hiding_tail(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                      int from, int to);
// superoffload_times(c, hw, weights, k, stv, false).iteration for every k in 0..max_tail, bitwise
// the same values; one pipeline pass for all counts when stv (without STV each count's pipeline
// waits for its own gate).
std::vector<double> superoffload_iterations(const CostInputs& c, const HardwareProfile& hw,
                                            config::WeightsPolicy weights, int max_tail, bool stv);

} // namespace sof::plan
