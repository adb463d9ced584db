// The offload planner: a performance model of one training iteration (SuperOffload paper Eq. 1-7,
// Deep Optimizer States Eq. 1) over a hardware profile; it fills the deck's `auto` choices.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "model/layout.h"

namespace sof::plan {

// One measured point of a link's bandwidth curve: a transfer of `bytes` runs at `gbps` GB/s.
struct BandwidthPoint {
    double bytes = 0; // transfer size in bytes
    double gbps = 0;  // achieved bandwidth, 1e9 bytes/s
};

// What the planner needs to know about one CPU+GPU pair (one rank). Units are SI (GB = 1e9 B)
// except where a name says MiB/GiB.
struct HardwareProfile {
    std::string name = "host";       // "gh200", "h100-pcie", "host", ...
    std::string source = "built-in"; // file it came from, or "built-in"
    bool host_device = true;         // the `host` device (emulated GPU): capacity from the deck

    // GPU (or the host device's compute)
    double gpu_peak_tflops = 0.15;        // dense peak of the training precision
    double gpu_achievable_fraction = 0.5; // of the peak that GEMMs reach (paper: achievable peak)
    double gpu_memory_gb = 8.0 * 1.073741824; // device memory (host device: 8 GiB default)
    double gpu_usable_fraction = 1.0;     // of gpu_memory usable for our buffers (context, caches)
    double gpu_adam_params_per_s = 3.0e9; // device optimizer throughput (U_g)

    // CPU (the cores of this rank)
    double cpu_memory_gb = 16.0;
    int cpu_cores = 2;
    double cpu_adam_params_per_s = 3.0e9; // CPU optimizer throughput incl. bf16 copy (U_c)
    // the same with bf16 or q8 moments (optimizer.state_dtype); 0: as with fp32 moments
    double cpu_adam_params_per_s_bf16 = 0, cpu_adam_params_per_s_q8 = 0;
    double cpu_cast_params_per_s = 4.0e9; // CPU fp32 -> bf16 downscale throughput (D_c)

    // CPU <-> GPU link: bandwidth as a function of transfer size, log-size interpolated
    std::string link = "memcpy";       // "NVLink-C2C", "PCIe Gen5 x16", ...
    std::vector<BandwidthPoint> h2d;   // sorted by bytes, at least one point
    std::vector<BandwidthPoint> d2h;   // sorted by bytes, at least one point
    double saturation_fraction = 0.95; // a size "saturates" the link at this share of the best

    // Rank <-> rank networks for the ZeRO-3 / Ulysses collectives (optional `network:` section):
    // the bandwidth one rank's collectives reach, each direction, among the ranks of one node
    // and, for a job over several nodes, across nodes (the slower link paces a ring). 0: not
    // given (no prediction).
    int ranks_per_node = 1;
    std::string intra_node = "", inter_node = "";
    double intra_node_gbps = 0, inter_node_gbps = 0;
};

// The built-in profile of the `host` device (this machine, CPU-only runs); same numbers as
// inputs/hardware/this-host.yaml.
HardwareProfile default_host_profile();

// Reads a hardware profile (inputs/hardware/*.yaml). Errors (Config kind) name file:line:key.
HardwareProfile load_hardware(const std::string& yaml_path);

// The profile a deck asks for: offload.hardware when set, else default_host_profile().
HardwareProfile hardware_for(const config::Config& cfg);

// Link bandwidth (GB/s) for a transfer of `bytes`, interpolated linearly in log(bytes) between
// the curve's points and clamped at its ends.
double bandwidth_gbps(const std::vector<BandwidthPoint>& curve, double bytes);
// Seconds to move `bytes` over the curve (0 for 0 bytes).
double transfer_seconds(const std::vector<BandwidthPoint>& curve, double bytes);
// The smallest transfer size (bytes, powers of two from 256 KiB to 4 GiB) whose bandwidth on both
// directions reaches saturation_fraction of that direction's best: the paper's 64 MB on GH200.
double saturating_bucket_bytes(const HardwareProfile& hw);

// Paper Eq. 1-3 for weight flow: efficiency = comp / (comp + comm), comp = 2*bsz*seq*params /
// peak_flops, comm = bytes*params / bw (bytes = 2: the paper's bf16 weights loaded once per pass;
// this engine fetches the fp32 master, 4). Independent of params.
double weight_flow_efficiency(double batch, double seq_len, double peak_flops,
                              double bw_bytes_per_s, double bytes_per_param = 2.0);

// Deep Optimizer States Eq. 1 (real-valued): k = (3/B + 1/Ug) / (1/Uc + 1/Dc - 1/(2B)),
// all in parameters/s. Returns +infinity when the denominator is <= 0 (the CPU alone keeps up
// with the link: no subgroup should go to the GPU).
double dos_interleave_k(double link_params_per_s, double gpu_update_params_per_s,
                        double cpu_update_params_per_s, double cpu_downscale_params_per_s);

// Paper Eq. 4-5 for the last CPU bucket: the smallest n >= 0 with
//   move(grad) + step_cpu(bucket) + move(param) <= bwd(n*bucket) + step_gpu(n*bucket),
// bwd(n*bucket) = 4 * tokens * bucket_params * n / flops (tokens = bsz*seq of one micro-batch).
// Stage times in seconds, flops and update throughput per second.
int tail_buckets_eq45(double move_grad_s, double step_cpu_s, double move_param_s,
                      double bucket_params, double tokens, double flops,
                      double gpu_update_params_per_s);

// Predicted time of one optimizer step (all grad_accum micro-batches) under one schedule, seconds.
struct IterationTimes {
    std::string schedule;  // "superoffload", "interleaved", "synchronous", "gpu-only"
    bool fits = true;      // its device-memory need fits the device
    double forward = 0;    // forward passes (with weight flow: incl. exposed fetches)
    double backward = 0;   // backward passes (idem)
    double compute = 0;    // forward + backward compute alone (no transfer)
    double transfer = 0;   // all CPU<->GPU traffic (grads, params, states, weights)
    double optimizer = 0;  // all optimizer work (CPU + device)
    double exposed = 0;    // iteration - compute: transfer + optimizer not hidden
    double iteration = 0;  // predicted wall time of the step
    double efficiency = 0; // compute / iteration
};

// Memory of one rank, bytes: the sums of the engine's memory plan (offload/memory_plan.h) by side
// and kind, plus the model's activations on the device.
struct MemoryEstimate {
    // device
    double weights = 0;       // working weights (stationary) or weight-flow slots
    double grads = 0;         // gradient buffers on the device
    double state = 0;         // fp32 params, m, v: resident tail buckets and streaming slots
    double staging = 0;       // statistics, cast and transfer staging
    double engine_device = 0; // the engine's device buffers: weights + grads + state + staging
    double activations = 0;   // saved activations + logits
    bool activations_on_device = true; // false on the `host` device (CPU model: host memory)
    double total = 0;                  // engine_device + activations (when on the device)
    // host (pinned and pageable)
    double host_state = 0;       // fp32 master params and moments (two sets with exact rollback)
    double host_grads = 0;       // offloaded grads (bf16 with cast host), flow's pinned model grads
    double host_weights = 0;     // weight flow's host working weights, staging mirrors
    double host_staging = 0;     // bf16 params for H2D, statistics, slot host copies
    double host_activations = 0; // offloaded activation checkpoints (pinned)
    double host_total = 0;   // all of the above (+ the arena and activations on the `host` device)
    bool device_fits = true; // total <= usable device memory
    bool host_fits = true;   // host_total <= host memory
};

// One engine-mode choice of the plan (offload.flow_grads, offload.cast, offload.rollback,
// optimizer.state_dtype) and the figures its why-line quotes, all of the final plan; for an
// `auto` choice also those of the plan with only this choice flipped (`other`: the deck values
// that give it, every other choice as made; it gets its own tail count).
struct ModeChoice {
    std::string key;        // the deck key, e.g. "offload.cast"
    std::string value;      // the chosen value: "device", "host", "exact", "inverse", "fp32", ...
    bool from_deck = false; // the deck set it (no alternative)
    std::string line;       // the why-line ("" when there is nothing to say)
    // the plan: host total, device total (bytes), the deck's schedule's step (s, no collectives)
    double host_bytes = 0, device_bytes = 0, step_s = 0;
    std::vector<std::string> other; // key=value settings of the flipped plan (empty: none)
    double other_host_bytes = 0, other_device_bytes = 0, other_step_s = 0; // the flipped plan's
};

// One way to close the CPU-step gap (gap.h): the plan with `settings` changed from the deck,
// its predicted step and tokens per step (a change of train.grad_accum changes the batch: per
// token it is iteration_s / tokens).
struct GapLever {
    std::string settings;   // "optimizer.state_dtype=bf16", "train.grad_accum=4", ...
    double iteration_s = 0; // predicted step, collectives included
    double tokens = 0;      // per optimizer step on this rank
    int tail_buckets = 0;   // the lever's own tail count
    bool fits = true;
    bool chosen = false; // the planner took it (the deck left the key `auto`)
};

struct Plan {
    config::WeightsPolicy weights = config::WeightsPolicy::Stationary; // never Auto
    // the engine modes the plan assumes (the deck's, or the planner's choice where `auto`)
    config::Rollback rollback = config::Rollback::Exact;          // never Auto
    config::CastAt cast = config::CastAt::Device;                 // never Auto
    config::StateDtype state_dtype = config::StateDtype::FP32;    // never Auto
    config::MasterDtype master_dtype = config::MasterDtype::FP32; // never Auto
    config::FlowGrads flow_grads = config::FlowGrads::Device;     // never Auto
    double bucket_mb = 64.0; // recommended bucket size (MiB): the link's saturation point
    int tail_buckets = 0;    // buckets kept on the device (paper Eq. 4-5)
    int interleave_k = 2;    // every k-th subgroup on the device (DOS Eq. 1, rounded)

    double deck_bucket_mb = 64.0; // bucket size the predictions use (the deck's)
    int num_buckets = 1;          // buckets of deck_bucket_mb over the model
    double interleave_k_raw = 0;  // DOS Eq. 1 before rounding (may be +inf)
    double flow_efficiency = 0;   // paper Eq. 3 for this batch and sequence length
    double num_params = 0;
    double tokens = 0;                       // per optimizer step on this rank (B*T*grad_accum)
    double capacity_bytes = 0;               // usable device memory
    double host_capacity_bytes = 0;          // host memory of one rank
    int shard_ranks = 1;                     // ZeRO-3 ranks the state is sharded over
    MemoryEstimate mem_stationary, mem_flow; // with the chosen tail count (superoffload)
    MemoryEstimate mem;                      // the deck's schedule with the chosen options
    bool fits = true;     // mem fits both the device and the host memory of one rank
    std::string why;      // when it does not: which side, by how much, and what to change
    std::string hardware; // profile name (source)

    // Predicted per-iteration times of the deck's schedule with the chosen options (seconds).
    double compute_s = 0, transfer_s = 0, optimizer_s = 0, exposed_s = 0, iteration_s = 0;
    double efficiency = 0;
    // Model FLOPs per step on this rank (3 x the forward: matrices and causal attention, no
    // recompute) and the predicted MFU: model FLOPs / (iteration_s x the profile's peak)
    double model_flops = 0, mfu = 0;
    // Collectives per step on this rank (ZeRO-3 over shard_ranks, Ulysses): bytes sent, their
    // time over the profile's network, and the part not hidden behind compute (added to
    // exposed_s and iteration_s; the lane overlaps them with forward and backward).
    double comm_bytes = 0, comm_s = 0, comm_exposed_s = 0;
    std::vector<IterationTimes> schedules; // every schedule, for comparison
    std::vector<ModeChoice> mode_choices;  // flow grads (weight flow), cast, rollback, moments
    std::vector<std::string> notes;        // why each choice was made
    std::vector<std::string> auto_notes;   // the subset for choices the deck left `auto`
    // The CPU-step gap (superoffload schedule, exposed time > 5% of the step): what closes it,
    // each lever's plan, and the step before the planner chose one (0: none was chosen).
    std::vector<GapLever> levers;
    double before_s = 0;
};

// Builds the plan for a deck and a model on a hardware profile. Deck values that are not `auto`
// are kept (and used for the predictions); `auto` ones are chosen by the model. shard_ranks: the
// ZeRO-3 ranks parameters, grads and optimizer state are sharded over (memory per rank).
// On a GPU profile the model runs on the GPU (its activations and the engine's buffers there).
// cfg's batch geometry must be the run's: train.global_batch resolved for the job's rank count
// (config::apply_batch_geometry, as `train` and `plan` do) before the plan is made.
Plan make_plan(const config::Config& cfg, const model::ArchConfig& model, const HardwareProfile& hw,
               int shard_ranks = 1);

// Adds the ZeRO-3 (+ Ulysses) collectives of shard_ranks ranks to p: bytes (comm_model.h), time
// over hw's network, the part not hidden behind compute (to exposed_s / iteration_s), a note.
void add_collectives(Plan& p, const config::Config& cfg, const model::ArchConfig& model,
                     const HardwareProfile& hw, int shard_ranks);

// Replaces the deck's auto values (offload.weights, gpu_tail_buckets, interleave_k, rollback,
// cast, flow_grads, optimizer.state_dtype, master_dtype) with the plan's; leaves explicit values
// alone.
void resolve_auto(config::Config& cfg, const Plan& p);

// "fp32", "bf16", "q8" (the deck's names of optimizer.state_dtype, Auto excluded).
const char* state_dtype_name(config::StateDtype d);

// Multi-line human report: choices with reasons, memory, and the per-schedule time table.
std::string describe(const Plan& p);

} // namespace sof::plan
