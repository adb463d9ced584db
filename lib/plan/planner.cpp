// The planner's choices: weights stationary vs flow (paper 4.2, Fig. 6), tail buckets (Eq. 4-5 and
// the whole bucket pipeline), bucket size (link saturation), interleave stride k (DOS Eq. 1).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/strfmt.h"
#include "device/device.h"
#include "plan/comm_model.h"
#include "plan/cost.h"
#include "plan/gap.h"
#include "plan/long_seq.h"
#include "plan/modes.h"
#include "plan/planner.h"

namespace sof::plan {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGB = 1e9;

const char* weights_name(config::WeightsPolicy w) {
    switch (w) {
    case config::WeightsPolicy::Stationary:
        return "stationary";
    case config::WeightsPolicy::Flow:
        return "flow";
    case config::WeightsPolicy::Auto:
        return "auto";
    }
    return "?";
}

config::WeightsPolicy choose_weights(const CostInputs& c, const config::Config& cfg, Plan& p) {
    if (cfg.offload.weights != config::WeightsPolicy::Auto) {
        p.notes.push_back(
            core::strfmt("weights: %s (set in the deck)", weights_name(cfg.offload.weights)));
        return cfg.offload.weights;
    }
    MemoryEstimate st = offload_memory(c, config::WeightsPolicy::Stationary, 0);
    if (st.total <= c.capacity_bytes) {
        p.notes.push_back(core::strfmt(
            "weights: stationary: the bf16 weights, grads and activations fit (%.2f of %.2f GB); "
            "weight flow would run at %.0f%% efficiency (Eq. 3, fp32 master fetched)",
            st.total / kGB, c.capacity_bytes / kGB, 100.0 * p.flow_efficiency));
        return config::WeightsPolicy::Stationary;
    }
    MemoryEstimate fl = flow_memory(c, cfg); // the grads' fallback to host memory included
    p.notes.push_back(core::strfmt(
        "weights: flow: stationary needs %.2f GB > %.2f GB usable; flow needs %.2f GB; Eq. 3 "
        "efficiency at B*T = %.0f is %.0f%%%s",
        st.total / kGB, c.capacity_bytes / kGB, fl.total / kGB, c.batch * c.seq,
        100.0 * p.flow_efficiency,
        p.flow_efficiency < 0.6 ? " (below 60%: weight fetches will be exposed; raise batch*seq)"
                                : ""));
    if (fl.total > c.capacity_bytes)
        p.notes.push_back("warning: even weight flow does not fit the device: " +
                          device_memory_advice(cfg, config::WeightsPolicy::Flow, 0));
    return config::WeightsPolicy::Flow;
}

} // namespace

int choose_tail(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy w,
                const config::Config& cfg, Plan& p) {
    if (cfg.offload.gpu_tail_buckets >= 0) {
        p.notes.push_back(
            core::strfmt("tail buckets: %d (set in the deck)", cfg.offload.gpu_tail_buckets));
        return std::min(cfg.offload.gpu_tail_buckets, c.num_buckets);
    }
    double bk = c.bucket_params;
    double move_g = transfer_seconds(hw.d2h, bk * c.grad_move_bytes);
    double step = bk / cpu_adam_rate(c, hw);
    if (c.param_move_bytes < 4) step += bk / hw.cpu_cast_params_per_s;
    double move_p = transfer_seconds(hw.h2d, bk * c.param_move_bytes);
    double flops = hw.gpu_peak_tflops * 1e12 * hw.gpu_achievable_fraction;
    int eq45 = tail_buckets_eq45(move_g, step, move_p, bk, c.batch * c.seq, flops,
                                 hw.gpu_adam_params_per_s);
    // largest n whose tail state still fits next to everything else (device, and host memory
    // when it fits without tail buckets)
    const bool host_ok0 = offload_memory(c, w, 0).host_fits;
    auto fits = [&](int n) {
        MemoryEstimate m = offload_memory(c, w, n);
        return m.total <= c.capacity_bytes && (!host_ok0 || m.host_fits);
    };
    // memory grows with n (tail state, ring slots kept): bisect for the largest fitting n
    int fit_max = -1;
    if (fits(0)) {
        int lo = 0, hi = c.num_buckets + 1; // fits(lo), !fits(hi) (hi past the end)
        if (fits(c.num_buckets)) lo = c.num_buckets;
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            (fits(mid) ? lo : hi) = mid;
        }
        fit_max = lo;
    }
    if (fit_max < 0) {
        p.notes.push_back("tail buckets: 0: the device is full even without tail buckets");
        return 0;
    }
    int n = std::min(eq45, fit_max);
    while (n < fit_max && !tail_hides_cpu(c, hw, w, n))
        ++n;
    if (tail_hides_cpu(c, hw, w, n) && n >= eq45) {
        p.notes.push_back(core::strfmt(
            "tail buckets: %d: Eq. 4-5 needs %d for the last bucket (%.2f ms out+step+back vs "
            "%.2f ms backward+GPU step per tail bucket); %d hide the whole CPU pipeline",
            n, eq45, 1e3 * (move_g + step + move_p),
            1e3 * (4.0 * c.batch * c.seq * bk / flops + bk / hw.gpu_adam_params_per_s), n));
        return n;
    }
    // memory-bound: take the fitting count with the shortest predicted iteration
    int best = 0;
    double best_t = std::numeric_limits<double>::infinity();
    for (int k = 0; k <= fit_max; ++k) {
        double t = superoffload_times(c, hw, w, k, c.stv, false).iteration;
        if (t < best_t - 1e-15) best_t = t, best = k;
    }
    p.notes.push_back(core::strfmt(
        "tail buckets: %d: hiding the CPU pipeline needs more than the %d that fit in device "
        "memory (Eq. 4-5 alone: %d); chose the fastest fitting count",
        best, fit_max, eq45));
    return best;
}

// The placement stride for memory plans: the interleaved schedule's k, else none.
int stride_of(const config::Config& cfg, const Plan& p) {
    return cfg.offload.schedule == config::Schedule::Interleaved ? p.interleave_k : 0;
}

namespace {

double mine_iteration(const config::Config& cfg, const IterationTimes& so, const IterationTimes& il,
                      const IterationTimes& sy) {
    if (cfg.offload.schedule == config::Schedule::Interleaved) return il.iteration;
    if (cfg.offload.schedule == config::Schedule::Synchronous) return sy.iteration;
    return so.iteration;
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

Plan make_plan(const config::Config& cfg, const model::ArchConfig& model, const HardwareProfile& hw,
               int shard_ranks) {
    Plan p = plan_once(cfg, model, hw, shard_ranks);
    close_gap(p, cfg, model, hw, shard_ranks);
    return p;
}

Plan plan_once(const config::Config& cfg, const model::ArchConfig& model, const HardwareProfile& hw,
               int shard_ranks) {
    SOF_CHECK(!hw.h2d.empty() && !hw.d2h.empty(), "hardware profile '%s' without link curves",
              hw.name.c_str());
    model::ArchConfig m = model;
    if (m.padded_vocab_size <= 0) m.padded_vocab_size = (m.vocab_size + 127) / 128 * 128;
    model::validate(m, cfg.parallel.sp, cfg.train.seq_len); // the heads and T over sp
    CostInputs c = make_cost_inputs(cfg, m, hw, shard_ranks);
    Plan p;
    p.hardware = hw.name + " (" + hw.source + ")";
    p.num_params = c.params;
    p.tokens = c.batch * c.seq * c.grad_accum;
    p.capacity_bytes = c.capacity_bytes;
    p.host_capacity_bytes = c.host_capacity_bytes;
    p.shard_ranks = c.shard_ranks;
    p.deck_bucket_mb = cfg.offload.bucket_mb;
    p.num_buckets = c.num_buckets;
    double flops = hw.gpu_peak_tflops * 1e12 * hw.gpu_achievable_fraction;
    double best_h2d = 0;
    for (const BandwidthPoint& q : hw.h2d)
        best_h2d = std::max(best_h2d, q.gbps);
    // Eq. 3 with this engine's fetch: the fp32 master (4 B/param), cast on the device
    p.flow_efficiency =
        weight_flow_efficiency(c.batch, c.seq, flops, best_h2d * kGB, c.fetch_bytes);

    double sat = saturating_bucket_bytes(hw);
    p.bucket_mb = sat / kMiB;
    p.notes.push_back(core::strfmt(
        "bucket: %.0f MiB saturates %s (%.0f/%.0f GB/s H2D/D2H there); the deck uses %.0f MiB "
        "(%.0f/%.0f GB/s)",
        p.bucket_mb, hw.link.c_str(), bandwidth_gbps(hw.h2d, sat), bandwidth_gbps(hw.d2h, sat),
        cfg.offload.bucket_mb, bandwidth_gbps(hw.h2d, c.bucket_params * 4.0),
        bandwidth_gbps(hw.d2h, c.bucket_params * 4.0)));

    double link_params = bandwidth_gbps(hw.h2d, c.bucket_params * 4.0) * kGB / 4.0;
    p.interleave_k_raw = dos_interleave_k(link_params, hw.gpu_adam_params_per_s,
                                          hw.cpu_adam_params_per_s, hw.cpu_cast_params_per_s);
    if (cfg.offload.interleave_k >= 1) {
        p.interleave_k = cfg.offload.interleave_k;
        p.notes.push_back(core::strfmt("interleave k: %d (set in the deck; DOS Eq. 1 gives %.2f)",
                                       p.interleave_k, p.interleave_k_raw));
    } else if (!std::isfinite(p.interleave_k_raw) || p.interleave_k_raw > c.num_buckets) {
        p.interleave_k = c.num_buckets + 1;
        p.notes.push_back(core::strfmt(
            "interleave k: %d: DOS Eq. 1 gives %.2f: the CPU keeps up with the link, no subgroup "
            "goes to the device",
            p.interleave_k, p.interleave_k_raw));
    } else {
        p.interleave_k = std::max(1, static_cast<int>(std::lround(p.interleave_k_raw)));
        p.notes.push_back(core::strfmt("interleave k: %d: DOS Eq. 1 gives %.2f (B = %.2f G "
                                       "params/s over the link)",
                                       p.interleave_k, p.interleave_k_raw, link_params / kGB));
    }

    if (cfg.offload.schedule == config::Schedule::Interleaved && cfg.offload.interleave_k < 1)
        p.auto_notes.push_back(p.notes.back());
    p.weights = choose_weights(c, cfg, p);
    if (cfg.offload.weights == config::WeightsPolicy::Auto) p.auto_notes.push_back(p.notes.back());
    p.mode_choices = resolve_modes(c, hw, cfg, p); // flow grads, cast, rollback, moments
    for (const ModeChoice& mc : p.mode_choices) {
        if (mc.line.empty()) continue;
        p.notes.push_back(mc.line);
        if (!mc.from_deck) p.auto_notes.push_back(mc.line);
    }
    p.tail_buckets = choose_tail(c, hw, p.weights, cfg, p);
    if (cfg.offload.gpu_tail_buckets < 0) p.auto_notes.push_back(p.notes.back());

    p.mem_stationary = offload_memory(c, config::WeightsPolicy::Stationary, p.tail_buckets);
    p.mem_flow = offload_memory(c, config::WeightsPolicy::Flow, p.tail_buckets);
    bool interleaved = cfg.offload.schedule == config::Schedule::Interleaved;
    p.mem = offload_memory(c, p.weights, p.tail_buckets, interleaved ? p.interleave_k : 0);
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

    IterationTimes so = superoffload_times(c, hw, p.weights, p.tail_buckets, c.stv);
    IterationTimes il = interleaved_times(c, hw, p.weights, p.interleave_k, p.tail_buckets);
    IterationTimes sy = synchronous_times(c, hw, p.weights);
    IterationTimes go = gpu_only_times(c, hw);
    p.schedules = {so, il, sy, go};
    if (cfg.parallel.sp > 1)
        p.notes.push_back(core::strfmt("Ulysses sp = %d: each rank computes T/sp = %.0f tokens "
                                       "outside attention and NH/sp heads inside",
                                       cfg.parallel.sp, c.seq));
    if (cfg.offload.enabled && go.fits && go.iteration < mine_iteration(cfg, so, il, sy))
        p.notes.push_back(
            core::strfmt("note: without offload the step fits on the device too "
                         "and is predicted %.1f%% faster",
                         100.0 * (mine_iteration(cfg, so, il, sy) / go.iteration - 1)));
    if (c.shard_ranks > 1) {
        const bool g16 = c.gather16;
        const size_t zb =
            offload::zero3_memory_plan(offload::zero3_slots(c.mem_base, g16, c.work_bf16),
                                       offload::MemSide::Device)
                .total(offload::MemSide::Device);
        p.notes.push_back(core::strfmt(
            "memory per rank with ZeRO-3 over %d ranks: the engine on a 1/%d shard, plus the "
            "wrapper's whole-unit slots (%s gather, fp32 grad: one each of the largest unit, "
            "%d and %d of the largest block)%s (%s, in %s memory)",
            c.shard_ranks, c.shard_ranks, c.work_bf16 ? "bf16" : "fp32",
            offload::kZeroGatherSlots - 1, offload::kZeroGradSlots - 1,
            g16 && !c.work_bf16 ? " and the bf16 gather buffers" : "",
            device::format_bytes(static_cast<double>(zb)).c_str(),
            c.host_device ? "the host device's arena" : "device"));
    } else
        p.notes.push_back("per rank, parameters not sharded: with ZeRO-3 over N ranks the "
                          "optimizer state, CPU step and transfers shrink by about 1/N");
    const IterationTimes* mine = &go;
    if (cfg.offload.enabled) {
        if (cfg.offload.schedule == config::Schedule::SuperOffload) mine = &p.schedules[0];
        if (cfg.offload.schedule == config::Schedule::Interleaved) mine = &p.schedules[1];
        if (cfg.offload.schedule == config::Schedule::Synchronous) mine = &p.schedules[2];
    } else {
        mine = &p.schedules[3];
    }
    p.compute_s = mine->compute;
    p.transfer_s = mine->transfer;
    p.optimizer_s = mine->optimizer;
    p.exposed_s = mine->exposed;
    p.iteration_s = mine->iteration;
    p.efficiency = mine->efficiency;
    add_collectives(p, cfg, model, hw, c.shard_ranks);
    if (const std::string n = moe_note(c, *mine); !n.empty()) p.notes.push_back(n);
    p.model_flops = 3.0 * c.fwd_s * flops * c.grad_accum;
    p.mfu = p.iteration_s > 0 ? p.model_flops / (p.iteration_s * hw.gpu_peak_tflops * 1e12) : 0;
    if (const std::string n = long_seq_note(c, cfg, m); !n.empty()) p.notes.push_back(n);
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

void resolve_auto(config::Config& cfg, const Plan& p) {
    if (cfg.offload.weights == config::WeightsPolicy::Auto) cfg.offload.weights = p.weights;
    if (cfg.offload.rollback == config::Rollback::Auto) cfg.offload.rollback = p.rollback;
    if (cfg.offload.cast == config::CastAt::Auto) cfg.offload.cast = p.cast;
    if (cfg.offload.flow_grads == config::FlowGrads::Auto) cfg.offload.flow_grads = p.flow_grads;
    if (cfg.optimizer.state_dtype == config::StateDtype::Auto)
        cfg.optimizer.state_dtype = p.state_dtype;
    if (cfg.optimizer.master_dtype == config::MasterDtype::Auto)
        cfg.optimizer.master_dtype = p.master_dtype;
    if (cfg.offload.gpu_tail_buckets < 0) cfg.offload.gpu_tail_buckets = p.tail_buckets;
    if (cfg.offload.interleave_k < 1) cfg.offload.interleave_k = p.interleave_k;
}

} // namespace sof::plan
