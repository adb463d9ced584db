// The planner's one pass (see pass.h): each stage a function that reads the stages before it;
// the choices are priced in choose.cpp and modes.cpp, the cost model in cost.cpp.
#include "plan/pass.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/strfmt.h"
#include "device/device.h"
#include "plan/advice.h"
#include "plan/choose.h"
#include "plan/comm_model.h"
#include "plan/cost.h"
#include "plan/long_seq.h"
#include "plan/modes.h"

namespace sof::plan {

namespace {

// Sizes and capacities of the plan, as the cost inputs have them.
Plan start_plan(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg) {
    Plan p;
    p.hardware = hw.name + " (" + hw.source + ")";
    p.num_params = c.params;
    p.tokens = c.batch * c.seq * c.grad_accum;
    p.capacity_bytes = c.capacity_bytes;
    p.host_capacity_bytes = c.host_capacity_bytes;
    p.shard_ranks = c.shard_ranks;
    p.deck_bucket_mb = cfg.offload.bucket_mb;
    p.num_buckets = c.num_buckets;
    return p;
}

// The engine modes (c's set to them) and the tail count their price chose, with the why-lines.
Priced choose_modes(CostInputs& c, const HardwareProfile& hw, const config::Config& cfg, Plan& p) {
    ModeDecision d = resolve_modes(c, hw, cfg, p); // flow grads, cast, rollback, moments, master
    p.mode_choices = std::move(d.choices);
    for (const ModeChoice& mc : p.mode_choices) {
        if (mc.line.empty()) continue;
        p.notes.push_back(mc.line);
        if (!mc.from_deck) p.auto_notes.push_back(mc.line);
    }
    p.tail_buckets = d.plan.tail;
    p.notes.push_back(d.plan.tail_note);
    if (cfg.offload.gpu_tail_buckets < 0) p.auto_notes.push_back(p.notes.back());
    return d.plan;
}

// Memory of the deck's schedule with the chosen modes and tail count, whether it fits, and what
// to change when it does not.
void size_memory(const CostInputs& c, const config::Config& cfg, const Priced& priced, Plan& p) {
    p.mem_stationary = offload_memory(c, config::WeightsPolicy::Stationary, p.tail_buckets);
    p.mem_flow = offload_memory(c, config::WeightsPolicy::Flow, p.tail_buckets);
    p.mem = priced.mem;
    if (!cfg.offload.enabled) {
        p.mem = MemoryEstimate{};
        p.mem.total = p.mem.engine_device = gpu_only_memory(c);
        p.mem.device_fits = p.mem.total <= c.capacity_bytes;
    }
    p.fits = p.mem.device_fits && p.mem.host_fits;
    auto gb = [](double b) { return device::format_bytes(b); };
    if (!p.mem.device_fits)
        p.why = core::strfmt(
            "device memory: needs %s (engine buffers %s + activations %s) > %s usable: %s",
            gb(p.mem.total).c_str(), gb(p.mem.engine_device).c_str(),
            gb(p.mem.activations_on_device ? p.mem.activations : 0.0).c_str(),
            gb(c.capacity_bytes).c_str(),
            device_memory_advice(cfg, p.weights, p.tail_buckets).c_str());
    if (!p.mem.host_fits)
        p.why += core::strfmt(
            "%shost memory: needs %s per rank (master+moments %s, grads %s, weights %s, "
            "staging %s, activation checkpoints %s) > %s: %s",
            p.why.empty() ? "" : "; ", gb(p.mem.host_total).c_str(), gb(p.mem.host_state).c_str(),
            gb(p.mem.host_grads).c_str(), gb(p.mem.host_weights).c_str(),
            gb(p.mem.host_staging).c_str(), gb(p.mem.host_activations).c_str(),
            gb(c.host_capacity_bytes).c_str(), host_memory_advice(cfg, p).c_str());
    if (!p.fits) p.notes.push_back("does not fit: " + p.why);
}

// Index in Plan::schedules of the deck's schedule (superoffload, interleaved, synchronous,
// gpu-only).
size_t deck_schedule(const config::Config& cfg) {
    if (!cfg.offload.enabled) return 3;
    if (cfg.offload.schedule == config::Schedule::Interleaved) return 1;
    if (cfg.offload.schedule == config::Schedule::Synchronous) return 2;
    return 0;
}

// Every schedule's predicted step; the deck's becomes the plan's times.
void predict_times(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
                   Plan& p) {
    p.schedules = {superoffload_times(c, hw, p.weights, p.tail_buckets, c.stv),
                   interleaved_times(c, hw, p.weights, p.interleave_k, p.tail_buckets),
                   synchronous_times(c, hw, p.weights), gpu_only_times(c, hw)};
    if (cfg.parallel.sp > 1)
        p.notes.push_back(core::strfmt("Ulysses sp = %d: each rank computes T/sp = %.0f tokens "
                                       "outside attention and NH/sp heads inside",
                                       cfg.parallel.sp, c.seq));
    const IterationTimes& go = p.schedules[3];
    const double offloaded = p.schedules[std::min<size_t>(deck_schedule(cfg), 2)].iteration;
    if (cfg.offload.enabled && go.fits && go.iteration < offloaded)
        p.notes.push_back(core::strfmt("note: without offload the step fits on the device too "
                                       "and is predicted %.1f%% faster",
                                       100.0 * (offloaded / go.iteration - 1)));
    const IterationTimes& mine = p.schedules[deck_schedule(cfg)];
    p.compute_s = mine.compute;
    p.transfer_s = mine.transfer;
    p.optimizer_s = mine.optimizer;
    p.exposed_s = mine.exposed;
    p.iteration_s = mine.iteration;
    p.efficiency = mine.efficiency;
}

// What ZeRO-3 over the plan's ranks adds to and takes from one rank's memory.
std::string sharding_note(const CostInputs& c) {
    if (c.shard_ranks <= 1)
        return "per rank, parameters not sharded: with ZeRO-3 over N ranks the optimizer state, "
               "CPU step and transfers shrink by about 1/N";
    const size_t zb =
        offload::zero3_memory_plan(offload::zero3_slots(c.mem_base, c.gather16, c.work_bf16),
                                   offload::MemSide::Device)
            .total(offload::MemSide::Device);
    return core::strfmt(
        "memory per rank with ZeRO-3 over %d ranks: the engine on a 1/%d shard, plus the "
        "wrapper's whole-unit slots (%s gather, fp32 grad: one each of the largest unit, %d and "
        "%d of the largest block)%s (%s, in %s memory)",
        c.shard_ranks, c.shard_ranks, c.work_bf16 ? "bf16" : "fp32", offload::kZeroGatherSlots - 1,
        offload::kZeroGradSlots - 1,
        c.gather16 && !c.work_bf16 ? " and the bf16 gather buffers" : "",
        device::format_bytes(static_cast<double>(zb)).c_str(),
        c.host_device ? "the host device's arena" : "device");
}

// A mixture-of-experts model computes with a fraction of the parameters it stores: which of the
// step's terms (compute: active parameters; the optimizer step and transfers: all of them) is the
// longest under the deck's schedule. "" for a dense model.
std::string moe_note(const CostInputs& c, const IterationTimes& t) {
    const double total = c.layer_params * c.layers;
    if (c.active_params >= total) return "";
    const char* bound = t.compute >= std::max(t.optimizer, t.transfer) ? "compute (active params)"
                        : t.optimizer >= t.transfer ? "the optimizer step (all params)"
                                                    : "transfers (all params)";
    return core::strfmt(
        "mixture of experts: the blocks hold %.3f B params, a token computes with %.3f B: "
        "memory, transfers (%.2f s) and the optimizer step (%.2f s) grow with the first, "
        "forward+backward (%.2f s) with the second; the longest term is %s (%.2f s exposed)",
        total / 1e9, c.active_params / 1e9, t.transfer, t.optimizer, t.compute, bound, t.exposed);
}

} // namespace

Plan plan_once(const config::Config& cfg, const model::ArchConfig& model, const HardwareProfile& hw,
               int shard_ranks) {
    SOF_CHECK(!hw.h2d.empty() && !hw.d2h.empty(), "hardware profile '%s' without link curves",
              hw.name.c_str());
    model::ArchConfig m = model;
    if (m.padded_vocab_size <= 0) m.padded_vocab_size = (m.vocab_size + 127) / 128 * 128;
    model::validate(m, cfg.parallel.sp, cfg.train.seq_len);   // the heads and T over sp
    CostInputs c = make_cost_inputs(cfg, m, hw, shard_ranks); // the deck's modes, `auto` unset
    Plan p = start_plan(c, hw, cfg);
    choose_link(c, hw, cfg, p);                        // bucket size, interleave stride
    choose_weights(c, cfg, p);                         // stationary or flow
    const Priced priced = choose_modes(c, hw, cfg, p); // engine modes, tail buckets
    size_memory(c, cfg, priced, p);                    // memory, fits, why
    predict_times(c, hw, cfg, p);                      // every schedule, the deck's
    p.notes.push_back(sharding_note(c));
    add_collectives(p, cfg, model, hw, c.shard_ranks); // ZeRO-3 / Ulysses over the network
    const IterationTimes& mine = p.schedules[deck_schedule(cfg)];
    if (const std::string n = moe_note(c, mine); !n.empty()) p.notes.push_back(n);
    const double flops = hw.gpu_peak_tflops * 1e12 * hw.gpu_achievable_fraction;
    p.model_flops = 3.0 * c.fwd_s * flops * c.grad_accum;
    p.mfu = p.iteration_s > 0 ? p.model_flops / (p.iteration_s * hw.gpu_peak_tflops * 1e12) : 0;
    if (const std::string n = long_seq_note(cfg, m, c.long_seq, c.grad_accum); !n.empty())
        p.notes.push_back(n);
    return p;
}

void add_collectives(Plan& p, const config::Config& cfg, const model::ArchConfig& model,
                     const HardwareProfile& hw, int shard_ranks) {
    if (shard_ranks <= 1) return; // ZeRO-0 / pure Ulysses jobs: the world size is not known here
    const CommVolume v = comm_per_step(
        model::make_layout(model), shard_ranks, cfg.parallel.sp, 3, cfg.train.batch_size,
        cfg.train.seq_len, cfg.train.grad_accum, cfg.model.recompute,
        cfg.train.dtype == config::Precision::BF16 &&
                (!cfg.debug.fp32_gathers || offload::bf16_working_weights(cfg, hw.host_device))
            ? 2
            : 4); // a model that reads bf16 gathers bf16 slots
    p.comm_bytes = v.total();
    const bool one_node = shard_ranks <= hw.ranks_per_node;
    const std::string& net = one_node ? hw.intra_node : hw.inter_node;
    const double gbps = one_node ? hw.intra_node_gbps : hw.inter_node_gbps;
    if (gbps <= 0) {
        p.notes.push_back(core::strfmt(
            "collectives: %.3f GB per rank per step; their time is not predicted (the hardware "
            "profile gives no %s network)",
            p.comm_bytes / 1e9, one_node ? "intra-node" : "inter-node"));
        return;
    }
    // the comm lane runs them while forward and backward compute (prefetched allgathers,
    // reduce-scatters behind the backward): only what exceeds the compute is exposed
    p.comm_s = p.comm_bytes / (gbps * 1e9);
    p.comm_exposed_s = std::max(0.0, p.comm_s - p.compute_s);
    p.exposed_s += p.comm_exposed_s;
    p.iteration_s += p.comm_exposed_s;
    p.efficiency = p.iteration_s > 0 ? p.compute_s / p.iteration_s : 0.0;
    p.notes.push_back(core::strfmt(
        "collectives: %.3f GB per rank per step over %s at %.1f GB/s = %.2f s, %s %.2f s of "
        "compute%s",
        p.comm_bytes / 1e9, net.c_str(), gbps, p.comm_s,
        p.comm_exposed_s > 0 ? "more than the" : "hidden behind the", p.compute_s,
        p.comm_exposed_s > 0
            ? core::strfmt(": %.2f s exposed (larger batch per rank, fewer ranks or a faster "
                           "network)",
                           p.comm_exposed_s)
                  .c_str()
            : ""));
}

} // namespace sof::plan
