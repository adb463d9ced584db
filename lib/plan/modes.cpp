// The planner's engine modes (see modes.h): where weight flow keeps the model's grads, where the
// bf16 cast happens, rollback and moment precision; decided together, explained from the final
// plan.
#include "plan/modes.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/strfmt.h"
#include "offload/memory_plan.h"
#include "offload/state_layout.h"

namespace sof::plan {

namespace {

// Two predicted step times within this fraction of each other are a tie (offload.cast).
constexpr double kTie = 0.005;

CostInputs with_modes(const CostInputs& c, const EngineModes& m) {
    CostInputs t = c;
    apply_modes(t, m);
    return t;
}

bool is_flow(const Plan& p) {
    return p.weights == config::WeightsPolicy::Flow;
}

// Slots of the weight-flow grad ring for c's modes (0: the model's grads are one pinned buffer).
int ring_slots(const CostInputs& c, const config::Config& cfg, const Plan& p) {
    return offload::grad_ring_slots(offload_plan_inputs(c, p.weights, 0, stride_of(cfg, p)));
}

bool same_modes(const EngineModes& a, const EngineModes& b) {
    return a.cast_host == b.cast_host && a.exact == b.exact && a.moments == b.moments &&
           a.master == b.master && a.ring_ok == b.ring_ok && a.speculate == b.speculate;
}

// One plan's mode decisions: the deck, the profile, the plan (weights and interleave k are final)
// and the candidates priced so far, by modes (the tail search is the expensive part).
struct Ctx {
    const HardwareProfile& hw;
    const config::Config& cfg;
    const Plan& p;
    std::vector<std::pair<EngineModes, Priced>> memo;

    Priced of(const CostInputs& c) {
        for (const auto& [m, f] : memo)
            if (same_modes(m, c.modes)) return f;
        const Priced f = price(c, hw, cfg, p);
        memo.emplace_back(c.modes, f);
        return f;
    }
};

// offload.flow_grads (weight flow): the grad ring when the ring exists (no accumulation, no
// streamed buckets, smaller than the model) and fits the device next to everything else (or
// pinned grads would not fit either); else one pinned fp32 buffer.
void decide_flow_grads(CostInputs& c, const config::Config& cfg, Plan& p) {
    const config::FlowGrads deck = cfg.offload.flow_grads;
    EngineModes m = c.modes;
    m.ring_ok = deck != config::FlowGrads::Host;
    apply_modes(c, m);
    p.flow_grads = deck == config::FlowGrads::Host ? deck : config::FlowGrads::Device;
    if (!is_flow(p)) return; // only weight flow has the choice
    if (ring_slots(c, cfg, p) == 0) {
        p.flow_grads = config::FlowGrads::Host;
        return;
    }
    if (deck != config::FlowGrads::Auto) return;
    const int k = stride_of(cfg, p);
    const bool ring_fits = offload_memory(c, p.weights, 0, k).device_fits;
    m.ring_ok = false;
    CostInputs pinned = with_modes(c, m);
    if (ring_fits || !offload_memory(pinned, p.weights, 0, k).device_fits) return;
    p.flow_grads = config::FlowGrads::Host;
    c = pinned;
}

// The cast rule of offload.cast: auto: the faster predicted step wins; within kTie (a tie) the
// one with less host memory; at equal host memory `device` (fp32 grads: nothing is rounded). One
// that does not fit the host loses to one that does. f[0]: cast device, f[1]: cast host.
int cast_pick(const Priced f[2]) {
    int pick = 0;
    if (f[1].step < f[0].step * (1 - kTie))
        pick = 1;
    else if (f[0].step < f[1].step * (1 - kTie))
        pick = 0;
    else
        pick = f[1].mem.host_total < f[0].mem.host_total ? 1 : 0;
    if (!f[pick].mem.host_fits && f[1 - pick].mem.host_fits) pick = 1 - pick;
    return pick;
}

// offload.cast (bf16 training): where values change precision on the link (cast_pick).
void decide_cast(CostInputs& c, Ctx& x, Plan& p) {
    const config::Config& cfg = x.cfg;
    const bool bf16 = cfg.train.dtype == config::Precision::BF16;
    if (cfg.offload.cast != config::CastAt::Auto || !bf16) {
        p.cast =
            cfg.offload.cast != config::CastAt::Auto ? cfg.offload.cast : config::CastAt::Device;
        EngineModes m = c.modes;
        m.cast_host = p.cast == config::CastAt::Host;
        apply_modes(c, m);
        return;
    }
    CostInputs opt[2];
    Priced f[2];
    for (int h = 0; h < 2; h++) {
        EngineModes m = c.modes;
        m.cast_host = h == 1;
        opt[h] = with_modes(c, m);
        f[h] = x.of(opt[h]);
    }
    const int pick = cast_pick(f);
    p.cast = pick ? config::CastAt::Host : config::CastAt::Device;
    c = opt[pick];
}

// The host-memory candidates in order of preference, among what the deck allows: fp32 master
// before bf16 (stochastic rounding); per master fp32, bf16, q8 moments (each rounds more); per
// format exact rollback before inverse (drift per rollback). Inverse only for fp32 master and
// fp32/bf16 moments (a bf16 master and q8 codes are not invertible), bf16 master only in bf16
// training.
struct HostCand {
    bool exact;
    sof_state_format moments;
    sof_dtype master;
};
std::vector<HostCand> host_candidates(const config::Config& cfg) {
    const bool rb_auto = cfg.offload.rollback == config::Rollback::Auto;
    const offload::StateFormat deck = offload::state_format(cfg.optimizer);
    std::vector<sof_state_format> moments = {deck.moments};
    if (cfg.optimizer.state_dtype == config::StateDtype::Auto)
        moments = {SOF_STATE_F32, SOF_STATE_BF16, SOF_STATE_Q8};
    std::vector<sof_dtype> masters = {deck.master};
    if (cfg.optimizer.master_dtype == config::MasterDtype::Auto)
        masters = cfg.train.dtype == config::Precision::BF16
                      ? std::vector<sof_dtype>{SOF_DTYPE_F32, SOF_DTYPE_BF16}
                      : std::vector<sof_dtype>{SOF_DTYPE_F32};
    std::vector<HostCand> v;
    for (sof_dtype pm : masters)
        for (sof_state_format f : moments) {
            const bool native = pm != SOF_DTYPE_F32 || f == SOF_STATE_Q8;
            for (bool e : rb_auto
                              ? std::vector<bool>{true, false}
                              : std::vector<bool>{cfg.offload.rollback == config::Rollback::Exact})
                if (e || !native) v.push_back({e, f, pm});
        }
    if (v.empty())
        v.push_back({cfg.offload.rollback != config::Rollback::Inverse, deck.moments, deck.master});
    return v;
}

CostInputs with_host(const CostInputs& c, bool exact, sof_state_format moments, sof_dtype master) {
    EngineModes m = c.modes;
    m.exact = exact;
    m.moments = moments;
    m.master = master;
    return with_modes(c, m);
}

// offload.rollback, optimizer.state_dtype and master_dtype: the first candidate whose host
// memory fits (the leanest when none does: the plan says so).
void decide_host_modes(CostInputs& c, const config::Config& cfg, Plan& p) {
    const std::vector<HostCand> cands = host_candidates(cfg);
    HostCand ch = cands.back();
    for (const HostCand& x : cands)
        if (offload_memory(with_host(c, x.exact, x.moments, x.master), p.weights, 0,
                           stride_of(cfg, p))
                .host_fits) {
            ch = x;
            break;
        }
    c = with_host(c, ch.exact, ch.moments, ch.master);
    p.rollback = ch.exact ? config::Rollback::Exact : config::Rollback::Inverse;
    p.state_dtype = offload::state_dtype_of(ch.moments);
    p.master_dtype = offload::master_dtype_of(ch.master);
}

// A choice with the plan's figures, and the flipped plan's when `other` names one.
ModeChoice choice(const char* key, const char* value, bool from_deck, const Priced& mine) {
    ModeChoice mc;
    mc.key = key;
    mc.value = value;
    mc.from_deck = from_deck;
    mc.host_bytes = mine.mem.host_total;
    mc.device_bytes = mine.mem.total;
    mc.step_s = mine.step;
    return mc;
}
void set_other(ModeChoice& mc, std::vector<std::string> other, const Priced& f) {
    mc.other = std::move(other);
    mc.other_host_bytes = f.mem.host_total;
    mc.other_device_bytes = f.mem.total;
    mc.other_step_s = f.step;
}

// Host bytes per parameter of the optimizer state with c's modes: the state set(s) of master,
// m and v.
double state_bytes_per_param(const CostInputs& c) {
    return (c.modes.exact && c.modes.speculate ? 2.0 : 1.0) * state_set_bytes(c);
}

// "fp32 master, q8 moments (2 x 6.03 B/param)"
std::string state_text(const CostInputs& c) {
    const int sets = c.modes.exact && c.modes.speculate ? 2 : 1;
    return core::strfmt(
        "%s master, %s moments (%d x %.2f B/param)", offload::master_deck_name(c.modes.master),
        offload::moments_deck_name(c.modes.moments), sets, state_bytes_per_param(c) / sets);
}

// Host bytes per parameter of weight flow with accumulation: the state set(s) + the fp32
// accumulator (docs/engine.md "Host memory per parameter").
std::string accumulation_text(const CostInputs& c) {
    const double state = state_bytes_per_param(c);
    return core::strfmt(
        "the model's fp32 grads accumulate over the step's %d micro-batches in one pinned fp32 "
        "buffer that the host step reads: weight flow with grad_accum > 1 costs %.4g B/param of "
        "host memory here (master, m, v %.4g + the 4-byte accumulator; without accumulation the "
        "grad ring with cast host keeps 2-byte bf16 grads instead): no exact scheme keeps the "
        "sums in 2 bytes (a bf16 accumulator would round every micro-batch) and weight flow "
        "holds no whole-model grads on the device; a larger train.batch_size with "
        "train.grad_accum: 1 avoids it where the activations fit (docs/engine.md)",
        c.grad_accum, state + 4, state);
}

ModeChoice explain_flow_grads(const CostInputs& c, Ctx& x, const Priced& mine) {
    const config::Config& cfg = x.cfg;
    const Plan& p = x.p;
    const config::FlowGrads deck = cfg.offload.flow_grads;
    const bool host = p.flow_grads == config::FlowGrads::Host;
    ModeChoice mc = choice("offload.flow_grads", host ? "host" : "device",
                           deck != config::FlowGrads::Auto, mine);
    const bool accum = c.grad_accum > 1;
    EngineModes m = c.modes;
    m.ring_ok = true;
    const CostInputs ring_c = with_modes(c, m);
    const int slots = ring_slots(ring_c, cfg, p);
    if (mc.from_deck) {
        const bool no_ring = deck == config::FlowGrads::Device && slots == 0;
        mc.line =
            core::strfmt("flow grads: %s (%s)%s", mc.value.c_str(),
                         no_ring ? "the deck says device, but there is no ring here (accumulation, "
                                   "interleaved or a small model): pinned host"
                                 : "set in the deck",
                         accum ? (": " + accumulation_text(c)).c_str() : "");
        return mc;
    }
    if (slots == 0) {
        mc.line = core::strfmt(
            "flow grads: host (host %s): %s", size_text(mine.mem.host_total).c_str(),
            accum ? accumulation_text(c).c_str()
                  : (stride_of(cfg, p) > 0
                         ? "the model's fp32 grads in one pinned buffer (4 B/param, read by the "
                           "host step directly): streamed buckets step after the backward"
                         : "the model's fp32 grads in one pinned buffer (4 B/param, read by the "
                           "host step directly): a ring would not be smaller than the model"));
        return mc;
    }
    m.ring_ok = host; // the other choice
    const Priced o = x.of(with_modes(c, m));
    set_other(mc, {std::string("offload.flow_grads=") + (host ? "device" : "host")}, o);
    const std::string cap = size_text(c.capacity_bytes);
    if (!host) {
        mc.line = core::strfmt(
            "flow grads: device: a ring of %d unit slots on the device (device %s of %s usable) "
            "instead of %s of pinned fp32 grads (device %s); host %s, %s",
            slots, size_text(mine.mem.total).c_str(), cap.c_str(),
            size_text(c.params * 4.0 / c.shard_ranks).c_str(), size_text(o.mem.total).c_str(),
            size_text(mine.mem.host_total).c_str(),
            mine.mem.host_total != o.mem.host_total
                ? ("with pinned grads " + size_text(o.mem.host_total)).c_str()
                : "the same with pinned grads");
    } else {
        Priced ring0;
        ring0.mem = offload_memory(ring_c, p.weights, 0, stride_of(cfg, p));
        mc.line = core::strfmt(
            "flow grads: host: the device ring of %d unit slots does not fit (device %s > %s "
            "usable without tail buckets); pinned fp32 grads instead (device %s, host %s)",
            slots, size_text(ring0.mem.total).c_str(), cap.c_str(),
            size_text(mine.mem.total).c_str(), size_text(mine.mem.host_total).c_str());
    }
    return mc;
}

ModeChoice explain_cast(const CostInputs& c, Ctx& x, const Priced& mine) {
    const config::Config& cfg = x.cfg;
    const Plan& p = x.p;
    const HardwareProfile& hw = x.hw;
    const bool bf16 = cfg.train.dtype == config::Precision::BF16;
    const bool host = p.cast == config::CastAt::Host;
    ModeChoice mc = choice("offload.cast", host ? "host" : "device",
                           cfg.offload.cast != config::CastAt::Auto, mine);
    if (mc.from_deck) {
        if (bf16) mc.line = core::strfmt("cast: %s (set in the deck)", mc.value.c_str());
        return mc;
    }
    if (!bf16) {
        mc.line = "cast: device (fp32 training: nothing is cast)";
        return mc;
    }
    EngineModes m = c.modes;
    m.cast_host = !host;
    const Priced o = x.of(with_modes(c, m));
    set_other(mc, {std::string("offload.cast=") + (host ? "device" : "host")}, o);
    const Priced f[2] = {host ? o : mine, host ? mine : o}; // device, host
    // where the grads cross the link: the bucket pipeline's D2H (stationary, the grad ring);
    // weight flow's pinned grads are written by the backward and rounded in place
    const bool d2h = !is_flow(p) || ring_slots(c, cfg, p) > 0;
    const double bk = c.bucket_params;
    std::string dev_t = core::strfmt("cast device %.2f ms", 1e3 * f[0].step);
    std::string host_t = core::strfmt("cast host %.2f ms", 1e3 * f[1].step);
    if (d2h) {
        dev_t += core::strfmt(": fp32 grads D2H at %.0f GB/s", bandwidth_gbps(hw.d2h, bk * 4.0));
        host_t += core::strfmt(": bf16 grads D2H at %.0f GB/s%s", bandwidth_gbps(hw.d2h, bk * 2.0),
                               is_flow(p) ? "" : ", bf16 params H2D cast by the CPU step");
    }
    std::string rule;
    if (std::abs(f[1].step - f[0].step) <= kTie * std::max(f[0].step, f[1].step))
        rule = mine.mem.host_total < o.mem.host_total
                   ? "; a tie within 0.5%: the one with less host memory"
                   : "; a tie within 0.5% at equal host memory: device (fp32 grads, nothing "
                     "rounded)";
    if (mine.mem.host_fits && !o.mem.host_fits)
        rule += core::strfmt("; cast %s does not fit the host", host ? "device" : "host");
    else if (!mine.mem.host_fits)
        rule += "; neither fits the host";
    mc.line = core::strfmt(
        "cast: %s: predicted step %.2f ms (%s; %s)%s; host %s (cast %s: %s)%s", mc.value.c_str(),
        1e3 * mine.step, dev_t.c_str(), host_t.c_str(),
        d2h ? ""
            : "; the grads do not cross D2H (the backward writes them to pinned host memory, "
              "cast host rounds them there)",
        size_text(mine.mem.host_total).c_str(), host ? "device" : "host",
        size_text(o.mem.host_total).c_str(), rule.c_str());
    return mc;
}

ModeChoice explain_rollback(const CostInputs& c, Ctx& x, const Priced& mine) {
    const config::Config& cfg = x.cfg;
    const Plan& p = x.p;
    const bool exact = p.rollback == config::Rollback::Exact;
    ModeChoice mc = choice("offload.rollback", exact ? "exact" : "inverse",
                           cfg.offload.rollback != config::Rollback::Auto, mine);
    if (mc.from_deck) {
        mc.line = core::strfmt("rollback: %s (set in the deck)", mc.value.c_str());
        return mc;
    }
    if (!c.modes.speculate) {
        mc.line = "rollback: exact (nothing speculates in this schedule: one state set)";
        return mc;
    }
    const Priced o = x.of(with_host(c, !exact, c.modes.moments, c.modes.master));
    set_other(mc, {std::string("offload.rollback=") + (exact ? "inverse" : "exact")}, o);
    const std::string cap = size_text(c.host_capacity_bytes);
    if (exact)
        mc.line = core::strfmt("rollback: exact (bitwise; the second state set fits: host %s of "
                               "%s; inverse would need %s)",
                               size_text(mine.mem.host_total).c_str(), cap.c_str(),
                               size_text(o.mem.host_total).c_str());
    else
        mc.line = core::strfmt(
            "rollback: inverse: exact rollback's second state set needs host %s > %s; "
            "inverse keeps one set (host %s) and undoes a rolled-back step arithmetically: "
            "not bitwise, measured drift at most 4.7e-6 absolute after 6 rollbacks "
            "(tests/train/test_combinations, docs/engine.md), once per rollback",
            size_text(o.mem.host_total).c_str(), cap.c_str(),
            size_text(mine.mem.host_total).c_str());
    return mc;
}

ModeChoice explain_state(const CostInputs& c, Ctx& x, const Priced& mine) {
    const config::Config& cfg = x.cfg;
    const Plan& p = x.p;
    const char* mom = offload::moments_deck_name(c.modes.moments);
    ModeChoice mc = choice("optimizer.state_dtype", mom,
                           cfg.optimizer.state_dtype != config::StateDtype::Auto, mine);
    if (mc.from_deck) return mc; // no line (the report's choices list shows it)
    const std::string cap = size_text(c.host_capacity_bytes);
    if (c.modes.moments == SOF_STATE_F32) {
        mc.line = core::strfmt("optimizer state: fp32 moments (fit: host %s of %s)",
                               size_text(mine.mem.host_total).c_str(), cap.c_str());
        return mc;
    }
    // the next more precise moments with the leanest rollback the deck allows
    const bool rb_auto = cfg.offload.rollback == config::Rollback::Auto;
    const sof_state_format prev = c.modes.moments == SOF_STATE_Q8 ? SOF_STATE_BF16 : SOF_STATE_F32;
    const bool e = rb_auto ? c.modes.master != SOF_DTYPE_F32 : c.modes.exact;
    const CostInputs oc = with_host(c, e, prev, c.modes.master);
    const Priced o = x.of(oc);
    std::vector<std::string> other = {std::string("optimizer.state_dtype=") +
                                      offload::moments_deck_name(prev)};
    if (rb_auto) other.push_back(e ? "offload.rollback=exact" : "offload.rollback=inverse");
    set_other(mc, other, o);
    mc.line = core::strfmt(
        "optimizer state: %s moments (%s): %s needs host %s > %s; %s needs %s (%s; "
        "convergence against fp32 state: docs/optimizer-plugins.md)",
        mom,
        c.modes.moments == SOF_STATE_Q8
            ? core::strfmt("8-bit codes, one scale per %d elements", c.mem_base.q8_block).c_str()
            : "m, v rounded to nearest even every step",
        state_text(oc).c_str(), size_text(o.mem.host_total).c_str(), cap.c_str(),
        state_text(c).c_str(), size_text(mine.mem.host_total).c_str(),
        mine.mem.host_fits ? "fits" : "does not fit either");
    (void)p;
    return mc;
}

ModeChoice explain_master(const CostInputs& c, Ctx& x, const Priced& mine) {
    const config::Config& cfg = x.cfg;
    const bool b16 = c.modes.master == SOF_DTYPE_BF16;
    ModeChoice mc = choice("optimizer.master_dtype", b16 ? "bf16" : "fp32",
                           cfg.optimizer.master_dtype != config::MasterDtype::Auto, mine);
    if (mc.from_deck) return mc;
    const std::string cap = size_text(c.host_capacity_bytes);
    if (!b16) {
        mc.line = core::strfmt("master params: fp32 (fit: host %s of %s)",
                               size_text(mine.mem.host_total).c_str(), cap.c_str());
        return mc;
    }
    const bool sd_auto = cfg.optimizer.state_dtype == config::StateDtype::Auto;
    const sof_state_format f = sd_auto ? SOF_STATE_Q8 : c.modes.moments;
    const CostInputs oc = with_host(c, true, f, SOF_DTYPE_F32);
    const Priced o = x.of(oc);
    std::vector<std::string> other = {"optimizer.master_dtype=fp32"};
    if (sd_auto)
        other.push_back(std::string("optimizer.state_dtype=") + offload::moments_deck_name(f));
    set_other(mc, other, o);
    mc.line = core::strfmt(
        "master params: bf16 with stochastic rounding (Philox, the same bits in every plugin): "
        "%s needs host %s > %s; %s needs %s (%s)",
        state_text(oc).c_str(), size_text(o.mem.host_total).c_str(), cap.c_str(),
        state_text(c).c_str(), size_text(mine.mem.host_total).c_str(),
        mine.mem.host_fits ? "fits" : "does not fit either");
    return mc;
}

} // namespace

const char* state_dtype_name(config::StateDtype d) {
    return d == config::StateDtype::Q8 ? "q8" : (d == config::StateDtype::BF16 ? "bf16" : "fp32");
}

std::string size_text(double b) {
    return b >= 1e9 ? core::strfmt("%.2f GB", b / 1e9) : core::strfmt("%.2f MB", b / 1e6);
}

ModeDecision resolve_modes(CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
                           Plan& p) {
    Ctx x{hw, cfg, p, {}};
    for (int pass = 0; pass < 3; pass++) {
        const EngineModes seen = c.modes; // the host modes flow grads and cast are decided with
        decide_flow_grads(c, cfg, p);
        decide_cast(c, x, p);
        decide_host_modes(c, cfg, p);
        if (c.modes.exact == seen.exact && c.modes.moments == seen.moments &&
            c.modes.master == seen.master)
            break;
    }
    // the why-lines, from the final modes
    ModeDecision d;
    d.plan = x.of(c);
    const Priced& mine = d.plan;
    if (is_flow(p)) d.choices.push_back(explain_flow_grads(c, x, mine));
    d.choices.push_back(explain_cast(c, x, mine));
    d.choices.push_back(explain_rollback(c, x, mine));
    d.choices.push_back(explain_state(c, x, mine));
    d.choices.push_back(explain_master(c, x, mine));
    return d;
}

} // namespace sof::plan
