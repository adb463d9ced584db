// The planner's cost model: sizes and FLOPs of one step, device-memory estimates and an
// event-level simulation of the bucket pipeline (D2H link, CPU, H2D link) for each schedule.
#include "plan/cost.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/activations.h"
#include "model/layout.h"
#include "model/model.h"
#include "offload/memory_plan.h"
#include "plan/long_seq.h"
#include "zero/memory.h"

namespace sof::plan {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// Seconds of one bucket's three pipeline stages (paper Eq. 4 left side).
struct BucketStages {
    double d2h = 0;  // move_bucket(grad)
    double step = 0; // step_cpu(bucket), incl. the CPU cast when cast=host
    double h2d = 0;  // move_bucket(param)
};

// Whether weight flow keeps the model's grads in pinned host memory (no grad ring): the backward
// writes them over the link itself, the bucket pipeline has no D2H stage.
bool flow_pinned_grads(const CostInputs& c, config::WeightsPolicy weights) {
    return weights == config::WeightsPolicy::Flow && !c.flow_ring;
}

BucketStages bucket_stages(const CostInputs& c, const HardwareProfile& hw,
                           config::WeightsPolicy weights) {
    BucketStages s;
    const bool flow = weights == config::WeightsPolicy::Flow;
    if (!flow_pinned_grads(c, weights))
        s.d2h = transfer_seconds(hw.d2h, c.bucket_params * c.grad_move_bytes);
    s.step = c.bucket_params / cpu_adam_rate(c, hw);
    // stationary: the new params go back H2D (bf16 with the cast on the host, written by the
    // step in the same pass); weight flow: the step updates the master, fetches read it
    if (!flow) {
        if (c.param_move_bytes < 4) s.step += c.bucket_params / hw.cpu_cast_params_per_s;
        s.h2d = transfer_seconds(hw.h2d, c.bucket_params * c.param_move_bytes);
    }
    return s;
}

// The CPU bucket pipeline of the last backward, speculative (the CPU starts on the first grads):
// bucket i (backward order) is ready at (i+1)/N of the backward and the first k buckets go to the
// CPU. The pipeline of k buckets is the first k stages of any longer one, so one pass gives the
// time (from the start of the last backward) when the last of them is back, for every k in
// 0..cpu_max: ends[k].
std::vector<double> cpu_pipeline_ends(const CostInputs& c, const BucketStages& s, double bwd_last,
                                      int cpu_max) {
    std::vector<double> ends(static_cast<size_t>(std::max(cpu_max, 0)) + 1, 0.0);
    double d2h_free = 0, cpu_free = 0, h2d_free = 0;
    for (int i = 0; i < cpu_max; ++i) {
        double ready = bwd_last * (i + 1) / c.num_buckets;
        d2h_free = std::max(ready, d2h_free) + s.d2h;
        cpu_free = std::max(d2h_free, cpu_free) + s.step;
        h2d_free = std::max(cpu_free, h2d_free) + s.h2d;
        ends[static_cast<size_t>(i) + 1] = h2d_free;
    }
    return ends;
}

// The same pipeline for `cpu` buckets; with wait_all the CPU starts only once every grad is on
// the host (no STV).
double cpu_pipeline_end(const CostInputs& c, const BucketStages& s, double bwd_last, int cpu,
                        bool wait_all) {
    if (!wait_all) return cpu_pipeline_ends(c, s, bwd_last, cpu).back();
    double d2h_free = 0, cpu_free = 0, h2d_free = 0;
    std::vector<double> arrived(static_cast<size_t>(std::max(cpu, 0)), 0.0);
    for (int i = 0; i < cpu; ++i) {
        double ready = bwd_last * (i + 1) / c.num_buckets;
        d2h_free = std::max(ready, d2h_free) + s.d2h;
        arrived[static_cast<size_t>(i)] = d2h_free;
    }
    double gate = std::max(bwd_last, cpu > 0 ? arrived.back() : 0.0);
    for (int i = 0; i < cpu; ++i) {
        cpu_free = std::max({arrived[static_cast<size_t>(i)], cpu_free, gate}) + s.step;
        h2d_free = std::max(cpu_free, h2d_free) + s.h2d;
    }
    return h2d_free;
}

// The last backward's share of a step and the device step of n tail buckets (n in 0..N).
struct LastBackward {
    double before_last = 0; // forward and backward before the last micro-batch's backward
    double bwd_last = 0;
};

LastBackward last_backward(const CostInputs& c, const HardwareProfile& hw,
                           config::WeightsPolicy weights) {
    double f = 0, b = 0, wt = 0;
    pass_times(c, hw, weights, &f, &b, &wt);
    LastBackward l;
    l.bwd_last = b / c.grad_accum;
    l.before_last = f + b - l.bwd_last;
    return l;
}

double tail_gpu_step(const CostInputs& c, const HardwareProfile& hw, int n) {
    return std::min(c.params, n * c.bucket_params) / hw.gpu_adam_params_per_s;
}

void finish_times(IterationTimes& t) {
    t.exposed = std::max(0.0, t.iteration - t.compute);
    t.efficiency = t.iteration > 0 ? t.compute / t.iteration : 0;
}

} // namespace

double state_set_bytes(const CostInputs& c) {
    const double mb =
        c.modes.moments == SOF_STATE_F32
            ? 4.0
            : (c.modes.moments == SOF_STATE_BF16 ? 2.0 : 1.0 + 4.0 / c.mem_base.q8_block);
    return (c.modes.master == SOF_DTYPE_BF16 ? 2.0 : 4.0) + 2.0 * mb;
}

double cpu_adam_rate(const CostInputs& c, const HardwareProfile& hw) {
    double r = 0;
    if (c.modes.moments == SOF_STATE_BF16) r = hw.cpu_adam_params_per_s_bf16;
    if (c.modes.moments == SOF_STATE_Q8) r = hw.cpu_adam_params_per_s_q8;
    return r > 0 ? r : hw.cpu_adam_params_per_s;
}

CostInputs make_cost_inputs(const config::Config& cfg, const model::ArchConfig& m,
                            const HardwareProfile& hw, int shard_ranks) {
    CostInputs c;
    // sizes from the parameter layout (GPT-2: blocks 12C^2 + 13C, unit 0 wte + wpe; LLaMA: the
    // block with GQA and SwiGLU, unit 0 wte, the last unit lnf + lm_head when untied)
    const model::ParamLayout layout = model::make_layout(m);
    auto unit_numel = [&](int u) {
        return static_cast<double>(layout.unit_begin[static_cast<size_t>(u) + 1] -
                                   layout.unit_begin[static_cast<size_t>(u)]);
    };
    c.layers = m.num_layers;
    const model::BlockParams blocks = model::block_params(m);
    c.layer_params = blocks.total / std::max(1, m.num_layers);
    c.active_params = blocks.active;
    c.embed_params = unit_numel(0);
    c.head_params = m.llama_family() && !m.tie_embeddings ? unit_numel(layout.num_units() - 1) : 0;
    c.params = static_cast<double>(layout.num_params);
    c.batch = cfg.train.batch_size;
    // Ulysses: each rank holds T/sp tokens outside attention and NH/sp heads over all T inside
    const double sp = std::max(1, cfg.parallel.sp), T = cfg.train.seq_len;
    c.seq = T / sp;
    c.grad_accum = std::max(1, cfg.train.grad_accum);
    c.weight_bytes = cfg.train.dtype == config::Precision::BF16 ? 2.0 : 4.0;
    c.stv = cfg.offload.stv != config::Stv::Off;
    c.prefetch_layers = std::max(1, cfg.offload.prefetch_layers);

    // forward FLOPs of one micro-batch: 2*tokens*matmul params (blocks + LM head) + attention
    // (scores and weighted sum over the query heads: 4*T*T*NH*hd per layer and sequence)
    double achievable = hw.gpu_peak_tflops * 1e12 * hw.gpu_achievable_fraction;
    c.fwd_s = forward_flops(m, c.active_params, c.batch, T, sp) / achievable;
    c.bwd_s = (cfg.model.recompute ? 3.0 : 2.0) * c.fwd_s;
    // the host device runs the CPU twins: fp32 activations whatever train.dtype
    const model::ActShape shape = activation_shape(cfg, hw.host_device ? 4.0 : c.weight_bytes);
    c.activation_bytes = activation_estimate(m, shape).total;
    c.long_seq = long_seq_cost(m, shape, hw, c.fwd_s, c.bwd_s);
    c.bwd_s += c.long_seq.extra_bwd_flops / achievable;

    c.bucket_params = std::max(1.0, cfg.offload.bucket_mb * kMiB / 4.0);
    double mem = hw.host_device && cfg.device.memory_gb > 0 ? cfg.device.memory_gb * kGiB
                                                            : hw.gpu_memory_gb * 1e9;
    c.capacity_bytes = mem * hw.gpu_usable_fraction;
    c.host_capacity_bytes = hw.cpu_memory_gb * 1e9;
    c.host_device = hw.host_device;
    c.shard_ranks = std::max(1, shard_ranks);
    c.work_bf16 = offload::bf16_working_weights(cfg, hw.host_device);
    c.gather16 = cfg.train.dtype == config::Precision::BF16 && !cfg.debug.fp32_gathers;
    c.interleave_k =
        cfg.offload.schedule == config::Schedule::Interleaved ? cfg.offload.interleave_k : 0;

    // The engine's buckets over this rank's shard, as the engine cuts them (placement later).
    config::Config pc = cfg;
    pc.offload.gpu_tail_buckets = 0;
    pc.offload.schedule = config::Schedule::SuperOffload;
    if (pc.offload.weights == config::WeightsPolicy::Auto)
        pc.offload.weights = config::WeightsPolicy::Stationary;
    c.mem_base = zero::sharded_plan_inputs(pc, layout, c.shard_ranks, c.work_bf16);
    const int stride = c.shard_ranks <= 64 ? 1 : c.shard_ranks / 64;
    for (int r = stride; r < c.shard_ranks; r += stride)
        c.mem_other.push_back(zero::sharded_plan_inputs(pc, layout, c.shard_ranks, c.work_bf16, r));
    if (stride > 1 && (c.shard_ranks - 1) % stride != 0)
        c.mem_other.push_back(
            zero::sharded_plan_inputs(pc, layout, c.shard_ranks, c.work_bf16, c.shard_ranks - 1));
    c.num_buckets = std::max(1, static_cast<int>(c.mem_base.bucket_numel.size()));
    EngineModes em; // the deck's; `auto` at the engine's unresolved default
    em.cast_host = cfg.offload.cast == config::CastAt::Host;
    em.exact = cfg.offload.rollback != config::Rollback::Inverse;
    const offload::StateFormat sf = offload::state_format(cfg.optimizer); // auto: fp32
    em.moments = sf.moments;
    em.master = sf.master;
    em.ring_ok = cfg.offload.flow_grads != config::FlowGrads::Host;
    em.speculate = cfg.offload.schedule != config::Schedule::Synchronous &&
                   cfg.offload.stv != config::Stv::Off;
    apply_modes(c, em);
    return c;
}

void apply_modes(CostInputs& c, const EngineModes& m) {
    c.modes = m;
    c.grad_move_bytes = m.cast_host ? c.weight_bytes : 4.0;
    c.param_move_bytes = m.cast_host || m.master == SOF_DTYPE_BF16 ? c.weight_bytes : 4.0;
    c.fetch_bytes = m.master == SOF_DTYPE_BF16 ? 2.0 : 4.0; // weight flow reads the master
    auto set = [&](offload::MemoryPlanInputs& in) {
        in.cast_host = m.cast_host;
        in.exact = m.exact;
        in.state.moments = m.moments;
        in.state.master = m.master;
        in.state.block = m.moments == SOF_STATE_Q8 ? in.q8_block : 0;
        in.ring_ok = m.ring_ok;
        in.speculate = m.speculate;
    };
    set(c.mem_base);
    for (offload::MemoryPlanInputs& in : c.mem_other)
        set(in);
    c.flow_ring =
        offload::grad_ring_slots(offload_plan_inputs(c, config::WeightsPolicy::Flow, 0, 0)) > 0;
}

offload::MemoryPlanInputs offload_plan_inputs(const CostInputs& c, config::WeightsPolicy weights,
                                              int tail, int interleave_k) {
    return offload_plan_inputs(c.mem_base, weights, tail, interleave_k);
}

offload::MemoryPlanInputs offload_plan_inputs(const offload::MemoryPlanInputs& base,
                                              config::WeightsPolicy weights, int tail,
                                              int interleave_k) {
    offload::MemoryPlanInputs in = base;
    in.flow = weights == config::WeightsPolicy::Flow;
    std::vector<offload::Bucket> b(in.bucket_numel.size());
    for (size_t i = 0; i < b.size(); i++) {
        b[i].index = static_cast<int>(i);
        b[i].end = in.bucket_numel[i];
    }
    offload::place_buckets(b, tail, interleave_k);
    in.bucket_place.clear();
    for (const offload::Bucket& x : b)
        in.bucket_place.push_back(x.place);
    return in;
}

namespace {

// One rank's estimate (see offload_memory).
MemoryEstimate rank_memory(const CostInputs& c, const offload::MemoryPlanInputs& base,
                           config::WeightsPolicy weights, int tail, int interleave_k) {
    using offload::MemKind;
    using offload::MemSide;
    offload::MemoryPlan plan =
        offload::make_memory_plan(offload_plan_inputs(base, weights, tail, interleave_k));
    if (c.shard_ranks > 1) { // the ZeRO-3 wrapper's whole-unit slots, in device memory
        const offload::MemoryPlan z = offload::zero3_memory_plan(
            offload::zero3_slots(base, c.gather16, c.work_bf16), MemSide::Device);
        plan.buffers.insert(plan.buffers.end(), z.buffers.begin(), z.buffers.end());
    }
    auto dev = [&](MemKind k) { return static_cast<double>(plan.total(MemSide::Device, k)); };
    auto host = [&](MemKind k) {
        return static_cast<double>(plan.total(MemSide::Pinned, k) + plan.total(MemSide::Host, k));
    };
    MemoryEstimate m;
    m.weights = dev(MemKind::Weights);
    m.grads = dev(MemKind::Grads);
    m.state = dev(MemKind::State);
    m.staging = dev(MemKind::Staging);
    m.engine_device = static_cast<double>(plan.total(MemSide::Device));
    m.activations = c.activation_bytes;
    m.activations_on_device = true; // the driver allocates them from the rank's device
    m.total = m.engine_device + m.activations;
    m.host_weights = host(MemKind::Weights);
    m.host_grads = host(MemKind::Grads);
    m.host_state = host(MemKind::State);
    m.host_staging = host(MemKind::Staging);
    m.host_activations = c.long_seq.host_bytes;
    m.host_total =
        m.host_weights + m.host_grads + m.host_state + m.host_staging + m.host_activations;
    // the host device's "device" memory is an arena in host memory
    if (c.host_device) m.host_total += m.engine_device + m.activations;
    m.device_fits = m.total <= c.capacity_bytes;
    m.host_fits = m.host_total <= c.host_capacity_bytes;
    return m;
}

} // namespace

MemoryEstimate offload_memory(const CostInputs& c, config::WeightsPolicy weights, int tail,
                              int interleave_k) {
    MemoryEstimate m = rank_memory(c, c.mem_base, weights, tail, interleave_k);
    for (const offload::MemoryPlanInputs& other : c.mem_other) {
        const MemoryEstimate o = rank_memory(c, other, weights, tail, interleave_k);
        for (auto f : {&MemoryEstimate::weights, &MemoryEstimate::grads, &MemoryEstimate::state,
                       &MemoryEstimate::staging, &MemoryEstimate::engine_device,
                       &MemoryEstimate::total, &MemoryEstimate::host_state,
                       &MemoryEstimate::host_grads, &MemoryEstimate::host_weights,
                       &MemoryEstimate::host_staging, &MemoryEstimate::host_total})
            m.*f = std::max(m.*f, o.*f);
        m.device_fits = m.device_fits && o.device_fits;
        m.host_fits = m.host_fits && o.host_fits;
    }
    return m;
}

MemoryEstimate flow_memory(const CostInputs& c, const config::Config& cfg, int tail,
                           int interleave_k) {
    MemoryEstimate ring = offload_memory(c, config::WeightsPolicy::Flow, tail, interleave_k);
    if (ring.device_fits || cfg.offload.flow_grads != config::FlowGrads::Auto) return ring;
    CostInputs h = c;
    EngineModes m = c.modes;
    m.ring_ok = false;
    apply_modes(h, m);
    const MemoryEstimate pinned =
        offload_memory(h, config::WeightsPolicy::Flow, tail, interleave_k);
    return pinned.device_fits ? pinned : ring;
}

double gpu_only_memory(const CostInputs& c) {
    // weights + fp32 grads + fp32 params (when the working precision is lower) + m + v
    double state = c.weight_bytes < 4 ? 12.0 : 8.0;
    return c.params * (c.weight_bytes + 4.0 + state) + c.activation_bytes;
}

void pass_times(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                double* forward, double* backward, double* weight_transfer) {
    double ga = c.grad_accum;
    if (weights != config::WeightsPolicy::Flow) { // (+ offloaded checkpoints not hidden)
        *forward = ga * (c.fwd_s + c.long_seq.ckpt_fwd_exposed_s);
        *backward = ga * (c.bwd_s + c.long_seq.ckpt_bwd_exposed_s);
        *weight_transfer = ga * c.long_seq.ckpt_link_s;
        return;
    }
    // per block: fetch its weights (the fp32 master, cast on the device) while the previous
    // block computes
    double fetch = transfer_seconds(hw.h2d, c.layer_params * c.fetch_bytes);
    // unit 0 (and an untied LM head's unit) each once per pass, exposed
    double embed_fetch = transfer_seconds(hw.h2d, c.embed_params * c.fetch_bytes);
    if (c.head_params > 0) embed_fetch += transfer_seconds(hw.h2d, c.head_params * c.fetch_bytes);
    double f_layer = c.fwd_s / c.layers, b_layer = c.bwd_s / c.layers;
    double f = c.fwd_s + embed_fetch + c.layers * std::max(0.0, fetch - f_layer);
    double b = c.bwd_s + embed_fetch + c.layers * std::max(0.0, fetch - b_layer);
    *forward = ga * (f + c.long_seq.ckpt_fwd_exposed_s);
    *backward = ga * (b + c.long_seq.ckpt_bwd_exposed_s);
    *weight_transfer = ga * (2.0 * (c.layers * fetch + embed_fetch) + c.long_seq.ckpt_link_s);
}

IterationTimes superoffload_times(const CostInputs& c, const HardwareProfile& hw,
                                  config::WeightsPolicy weights, int tail, bool stv,
                                  bool with_memory) {
    IterationTimes t;
    t.schedule = "superoffload";
    int n = std::clamp(tail, 0, c.num_buckets);
    int cpu = c.num_buckets - n;
    double wt = 0;
    pass_times(c, hw, weights, &t.forward, &t.backward, &wt);
    t.compute = c.grad_accum * (c.fwd_s + c.bwd_s);
    BucketStages s = bucket_stages(c, hw, weights);
    double bwd_last = t.backward / c.grad_accum;
    double before_last = t.forward + t.backward - bwd_last;
    double tail_params = std::min(c.params, n * c.bucket_params);
    double gpu_step = tail_gpu_step(c, hw, n);
    double cpu_end = cpu_pipeline_end(c, s, bwd_last, cpu, !stv);
    t.iteration = before_last + std::max(bwd_last + gpu_step, cpu_end);
    double cpu_params = c.params - tail_params;
    t.transfer = wt + (s.d2h + s.h2d) * cpu_params / c.bucket_params;
    t.optimizer = s.step * cpu_params / c.bucket_params + gpu_step;
    if (with_memory) {
        MemoryEstimate mem = offload_memory(c, weights, n);
        t.fits = mem.device_fits && mem.host_fits;
    }
    finish_times(t);
    return t;
}

IterationTimes synchronous_times(const CostInputs& c, const HardwareProfile& hw,
                                 config::WeightsPolicy weights) {
    // paper Eq. 6: grads stream out during backward, the CPU steps after all arrived, params
    // stream back per bucket; no buckets stay on the device
    IterationTimes t = superoffload_times(c, hw, weights, 0, false);
    t.schedule = "synchronous";
    return t;
}

IterationTimes interleaved_times(const CostInputs& c, const HardwareProfile& hw,
                                 config::WeightsPolicy weights, int k, int tail) {
    IterationTimes t;
    t.schedule = "interleaved";
    double wt = 0;
    pass_times(c, hw, weights, &t.forward, &t.backward, &wt);
    t.compute = c.grad_accum * (c.fwd_s + c.bwd_s);
    const double S = c.bucket_params;
    const int N = c.num_buckets;
    int gpu_groups = k >= 1 ? N / k : 0; // subgroups i with (i+1) % k == 0
    int cpu_groups = N - gpu_groups;
    double grad_out = transfer_seconds(hw.d2h, S * c.grad_move_bytes); // last bucket exposed
    double cpu = cpu_groups * S * (1.0 / cpu_adam_rate(c, hw) + 1.0 / hw.cpu_cast_params_per_s);
    const double sb = state_set_bytes(c); // streamed p, m, v bytes per param
    double state = transfer_seconds(hw.h2d, S * sb);
    double h2d = gpu_groups * state + cpu_groups * transfer_seconds(hw.h2d, S * c.weight_bytes);
    double d2h = gpu_groups * transfer_seconds(hw.d2h, S * sb);
    double gpu = gpu_groups * S / hw.gpu_adam_params_per_s;
    double first = gpu_groups > 0 ? state : 0.0; // the first GPU subgroup's prefetch
    double update = std::max({cpu, h2d, d2h, gpu + first});
    t.iteration = t.forward + t.backward + grad_out + update;
    t.transfer = wt + N * grad_out + h2d + d2h;
    t.optimizer = cpu + gpu;
    MemoryEstimate mem = offload_memory(c, weights, tail, k);
    t.fits = mem.device_fits && mem.host_fits;
    finish_times(t);
    return t;
}

IterationTimes gpu_only_times(const CostInputs& c, const HardwareProfile& hw) {
    IterationTimes t;
    t.schedule = "gpu-only";
    t.forward = c.grad_accum * c.fwd_s;
    t.backward = c.grad_accum * c.bwd_s;
    t.compute = t.forward + t.backward;
    t.optimizer = c.params / hw.gpu_adam_params_per_s;
    t.iteration = t.compute + t.optimizer;
    t.fits = gpu_only_memory(c) <= c.capacity_bytes;
    finish_times(t);
    return t;
}

int tail_buckets_eq45(double move_grad_s, double step_cpu_s, double move_param_s,
                      double bucket_params, double tokens, double flops,
                      double gpu_update_params_per_s) {
    double lhs = move_grad_s + step_cpu_s + move_param_s;
    double per_bucket =
        4.0 * tokens * bucket_params / flops + bucket_params / gpu_update_params_per_s;
    SOF_CHECK(per_bucket > 0, "tail_buckets_eq45: non-positive backward+step time per bucket");
    double n = std::ceil(lhs / per_bucket - 1e-12);
    return static_cast<int>(std::max(0.0, n));
}

bool tail_hides_cpu(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                    int tail) {
    int n = std::clamp(tail, 0, c.num_buckets);
    double bwd_last = last_backward(c, hw, weights).bwd_last;
    double end =
        cpu_pipeline_end(c, bucket_stages(c, hw, weights), bwd_last, c.num_buckets - n, false);
    return end <= bwd_last + tail_gpu_step(c, hw, n);
}

int first_hiding_tail(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy weights,
                      int from, int to) {
    const int N = c.num_buckets;
    const double bwd_last = last_backward(c, hw, weights).bwd_last;
    const std::vector<double> ends =
        cpu_pipeline_ends(c, bucket_stages(c, hw, weights), bwd_last, N - std::clamp(from, 0, N));
    auto hides = [&](int tail) {
        int n = std::clamp(tail, 0, N);
        return ends[static_cast<size_t>(N - n)] <= bwd_last + tail_gpu_step(c, hw, n);
    };
    int n = from;
    while (n < to && !hides(n))
        ++n;
    return n;
}

std::vector<double> superoffload_iterations(const CostInputs& c, const HardwareProfile& hw,
                                            config::WeightsPolicy weights, int max_tail, bool stv) {
    std::vector<double> it(static_cast<size_t>(std::max(max_tail, 0)) + 1, 0.0);
    if (!stv) { // the CPU waits for every grad: each count's pipeline has its own start
        for (int k = 0; k <= max_tail; ++k)
            it[static_cast<size_t>(k)] =
                superoffload_times(c, hw, weights, k, false, false).iteration;
        return it;
    }
    const int N = c.num_buckets;
    const LastBackward l = last_backward(c, hw, weights);
    const std::vector<double> ends =
        cpu_pipeline_ends(c, bucket_stages(c, hw, weights), l.bwd_last, N);
    for (int k = 0; k <= max_tail; ++k) {
        int n = std::clamp(k, 0, N);
        it[static_cast<size_t>(k)] = l.before_last + std::max(l.bwd_last + tail_gpu_step(c, hw, n),
                                                              ends[static_cast<size_t>(N - n)]);
    }
    return it;
}

} // namespace sof::plan
