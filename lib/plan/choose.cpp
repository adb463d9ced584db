// The planner's placement choices (see choose.h): bucket size and interleave stride from the link,
// weights stationary or flow, and tail buckets (paper Eq. 4-5 and the whole bucket pipeline).
#include "plan/choose.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/strfmt.h"
#include "plan/advice.h"

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

// The largest tail count whose state still fits next to everything else (device, and host
// memory when it fits without tail buckets); -1 when the device is full without any.
int largest_fitting_tail(const CostInputs& c, config::WeightsPolicy w) {
    const bool host_ok0 = offload_memory(c, w, 0).host_fits;
    auto fits = [&](int n) {
        MemoryEstimate m = offload_memory(c, w, n);
        return m.total <= c.capacity_bytes && (!host_ok0 || m.host_fits);
    };
    if (!fits(0)) return -1;
    // memory grows with n (tail state, ring slots kept): bisect for the largest fitting n
    int lo = 0, hi = c.num_buckets + 1; // fits(lo), !fits(hi) (hi past the end)
    if (fits(c.num_buckets)) lo = c.num_buckets;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
    }
    return lo;
}

// Tail buckets for c's modes: the deck's count, else Eq. 4-5 and the whole bucket pipeline
// within memory, else (memory-bound) the fastest fitting count; *note says why.
int choose_tail(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy w,
                const config::Config& cfg, std::string* note) {
    if (cfg.offload.gpu_tail_buckets >= 0) {
        *note = core::strfmt("tail buckets: %d (set in the deck)", cfg.offload.gpu_tail_buckets);
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
    const int fit_max = largest_fitting_tail(c, w);
    if (fit_max < 0) {
        *note = "tail buckets: 0: the device is full even without tail buckets";
        return 0;
    }
    const int n = first_hiding_tail(c, hw, w, std::min(eq45, fit_max), fit_max);
    if (tail_hides_cpu(c, hw, w, n) && n >= eq45) {
        *note = core::strfmt(
            "tail buckets: %d: Eq. 4-5 needs %d for the last bucket (%.2f ms out+step+back vs "
            "%.2f ms backward+GPU step per tail bucket); %d hide the whole CPU pipeline",
            n, eq45, 1e3 * (move_g + step + move_p),
            1e3 * (4.0 * c.batch * c.seq * bk / flops + bk / hw.gpu_adam_params_per_s), n);
        return n;
    }
    // memory-bound: take the fitting count with the shortest predicted iteration
    int best = 0;
    double best_t = std::numeric_limits<double>::infinity();
    const std::vector<double> its = superoffload_iterations(c, hw, w, fit_max, c.stv);
    for (int k = 0; k <= fit_max; ++k) {
        double t = its[static_cast<size_t>(k)];
        if (t < best_t - 1e-15) best_t = t, best = k;
    }
    *note = core::strfmt(
        "tail buckets: %d: hiding the CPU pipeline needs more than the %d that fit in device "
        "memory (Eq. 4-5 alone: %d); chose the fastest fitting count",
        best, fit_max, eq45);
    return best;
}

// The step of the deck's schedule with `tail` buckets (before collectives).
double step_time(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
                 const Plan& p, int tail) {
    if (cfg.offload.schedule == config::Schedule::Interleaved)
        return interleaved_times(c, hw, p.weights, p.interleave_k, tail).iteration;
    if (cfg.offload.schedule == config::Schedule::Synchronous)
        return synchronous_times(c, hw, p.weights).iteration;
    return superoffload_times(c, hw, p.weights, tail, c.stv).iteration;
}

} // namespace

Priced price(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
             const Plan& p) {
    Priced f;
    f.tail = choose_tail(c, hw, p.weights, cfg, &f.tail_note);
    f.mem = offload_memory(c, p.weights, f.tail, stride_of(cfg, p));
    f.step = step_time(c, hw, cfg, p, f.tail);
    return f;
}

int stride_of(const config::Config& cfg, const Plan& p) {
    return cfg.offload.schedule == config::Schedule::Interleaved ? p.interleave_k : 0;
}

void choose_link(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
                 Plan& p) {
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
}

void choose_weights(const CostInputs& c, const config::Config& cfg, Plan& p) {
    if (cfg.offload.weights != config::WeightsPolicy::Auto) {
        p.notes.push_back(
            core::strfmt("weights: %s (set in the deck)", weights_name(cfg.offload.weights)));
        p.weights = cfg.offload.weights;
        return;
    }
    MemoryEstimate st = offload_memory(c, config::WeightsPolicy::Stationary, 0);
    if (st.total <= c.capacity_bytes) {
        p.notes.push_back(core::strfmt(
            "weights: stationary: the bf16 weights, grads and activations fit (%.2f of %.2f GB); "
            "weight flow would run at %.0f%% efficiency (Eq. 3, fp32 master fetched)",
            st.total / kGB, c.capacity_bytes / kGB, 100.0 * p.flow_efficiency));
        p.weights = config::WeightsPolicy::Stationary;
        p.auto_notes.push_back(p.notes.back());
        return;
    }
    MemoryEstimate fl = flow_memory(c, cfg); // the grads' fallback to host memory included
    p.notes.push_back(core::strfmt(
        "weights: flow: stationary needs %.2f GB > %.2f GB usable; flow needs %.2f GB; Eq. 3 "
        "efficiency at B*T = %.0f is %.0f%%%s",
        st.total / kGB, c.capacity_bytes / kGB, fl.total / kGB, c.batch * c.seq,
        100.0 * p.flow_efficiency,
        p.flow_efficiency < 0.6 ? " (below 60%: weight fetches will be exposed; raise batch*seq)"
                                : ""));
    p.weights = config::WeightsPolicy::Flow;
    if (fl.total > c.capacity_bytes)
        p.notes.push_back("warning: even weight flow does not fit the device: " +
                          device_memory_advice(cfg, config::WeightsPolicy::Flow, 0));
    p.auto_notes.push_back(p.notes.back());
}

} // namespace sof::plan
