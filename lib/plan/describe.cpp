// The planner's human report: hardware, choices with their reasons, device memory and the
// predicted per-schedule iteration times.
#include <string>

#include "core/strfmt.h"
#include "plan/planner.h"

namespace sof::plan {

namespace {

constexpr double kGB = 1e9;

const char* weights_name(config::WeightsPolicy w) {
    return w == config::WeightsPolicy::Flow ? "flow" : "stationary";
}

// Memory table unit: GB, or MiB for small devices (test decks, the `host` device).
struct Unit {
    double div;
    const char* name;
};
Unit unit_for(const Plan& p) {
    return p.capacity_bytes < 4e9 ? Unit{1048576.0, "MiB"} : Unit{kGB, "GB"};
}

std::string mem_line(const char* what, const MemoryEstimate& m, Unit u) {
    return core::strfmt("  %-10s weights %7.2f  grads %7.2f  state %7.2f  staging %6.2f  "
                        "activations %7.2f  total %7.2f %s%s\n",
                        what, m.weights / u.div, m.grads / u.div, m.state / u.div,
                        m.staging / u.div, m.activations / u.div, m.total / u.div, u.name,
                        m.device_fits ? "" : " (does not fit)");
}

std::string host_line(const char* what, const MemoryEstimate& m, Unit u) {
    return core::strfmt("  %-10s state %7.2f  grads %7.2f  weights %7.2f  staging %6.2f  "
                        "total %7.2f %s%s\n",
                        what, m.host_state / u.div, m.host_grads / u.div, m.host_weights / u.div,
                        m.host_staging / u.div, m.host_total / u.div, u.name,
                        m.host_fits ? "" : " (does not fit)");
}

} // namespace

std::string describe(const Plan& p) {
    std::string s;
    Unit u = unit_for(p);
    s += core::strfmt("plan on %s\n", p.hardware.c_str());
    s += core::strfmt("  model %.3f B params, %.0f tokens per step, %d buckets of %g MiB, "
                      "device memory %.2f GB usable, host memory %.2f GB\n",
                      p.num_params / 1e9, p.tokens, p.num_buckets, p.deck_bucket_mb,
                      p.capacity_bytes / kGB, p.host_capacity_bytes / kGB);
    s += "choices\n";
    s += core::strfmt("  weights: %s\n  gpu_tail_buckets: %d\n  interleave_k: %d\n"
                      "  recommended bucket_mb: %.0f\n",
                      weights_name(p.weights), p.tail_buckets, p.interleave_k, p.bucket_mb);
    s += core::strfmt("  rollback: %s\n  cast: %s\n  optimizer state: %s moments, %s master\n%s",
                      p.rollback == config::Rollback::Inverse ? "inverse" : "exact",
                      p.cast == config::CastAt::Host ? "host" : "device",
                      state_dtype_name(p.state_dtype),
                      p.master_dtype == config::MasterDtype::BF16 ? "bf16" : "fp32",
                      p.weights == config::WeightsPolicy::Flow
                          ? (p.flow_grads == config::FlowGrads::Host ? "  flow grads: host\n"
                                                                     : "  flow grads: device\n")
                          : "");
    s += "why\n";
    for (const std::string& n : p.notes)
        s += "  - " + n + "\n";
    s += core::strfmt("device memory per rank (with %d tail buckets; deck: the deck's schedule)\n",
                      p.tail_buckets);
    s += mem_line("stationary", p.mem_stationary, u);
    s += mem_line("flow", p.mem_flow, u);
    s += mem_line("deck", p.mem, u);
    if (!p.mem.activations_on_device)
        s += "  (the host device runs the CPU model: activations are counted in host memory)\n";
    s += core::strfmt("host memory per rank (%.2f GB%s)\n", p.host_capacity_bytes / kGB,
                      p.shard_ranks > 1
                          ? core::strfmt(", state sharded over %d ranks", p.shard_ranks).c_str()
                          : "");
    s += host_line("stationary", p.mem_stationary, u);
    s += host_line("flow", p.mem_flow, u);
    s += host_line("deck", p.mem, u);
    s += p.fits ? std::string("fits: yes (device and host)\n") : "fits: no: " + p.why + "\n";
    s += "predicted step time (ms)\n";
    s += core::strfmt("  %-13s %5s %9s %9s %9s %9s %9s %9s %6s\n", "schedule", "fits", "forward",
                      "backward", "transfer", "optimizer", "exposed", "iteration", "eff");
    for (const IterationTimes& t : p.schedules)
        s += core::strfmt("  %-13s %5s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %5.1f%%\n",
                          t.schedule.c_str(), t.fits ? "yes" : "no", 1e3 * t.forward,
                          1e3 * t.backward, 1e3 * t.transfer, 1e3 * t.optimizer, 1e3 * t.exposed,
                          1e3 * t.iteration, 100.0 * t.efficiency);
    s += core::strfmt("deck's schedule: %.2f ms per step (compute %.2f, exposed %.2f), "
                      "%.1f%% efficiency, MFU %.1f%%\n",
                      1e3 * p.iteration_s, 1e3 * p.compute_s, 1e3 * p.exposed_s,
                      100.0 * p.efficiency, 100.0 * p.mfu);
    if (p.before_s > 0)
        s += core::strfmt("CPU-step gap closed by the planner: %.2f ms per step before, %.2f ms "
                          "after (%s moments; gap levers above)\n",
                          1e3 * p.before_s, 1e3 * p.iteration_s, state_dtype_name(p.state_dtype));
    return s;
}

} // namespace sof::plan
