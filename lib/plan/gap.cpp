// The CPU-step gap: when the CPU's optimizer step (and the transfers around it) outlast forward
// and backward, price what closes it and, where the deck leaves the moments `auto`, take it.
#include "plan/gap.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/strfmt.h"
#include "plan/modes.h"
#include "plan/pass.h"

namespace sof::plan {

namespace {

// An exposed share of the step worth closing, and the gain a planner's choice must bring.
constexpr double kGap = 0.05;
// A leaner moments format is taken over a more precise one only when faster by more than this.
constexpr double kTie = 0.02;

// The moments formats leaner than `d`, most precise first.
std::vector<config::StateDtype> leaner(config::StateDtype d) {
    if (d == config::StateDtype::FP32) return {config::StateDtype::BF16, config::StateDtype::Q8};
    if (d == config::StateDtype::BF16) return {config::StateDtype::Q8};
    return {};
}

GapLever lever_of(const Plan& q, std::string settings) {
    GapLever l;
    l.settings = std::move(settings);
    l.iteration_s = q.iteration_s;
    l.tokens = q.tokens;
    l.tail_buckets = q.tail_buckets;
    l.fits = q.fits;
    return l;
}

// Seconds per the deck's tokens per step.
double per_step(const GapLever& l, double deck_tokens) {
    return l.iteration_s * deck_tokens / l.tokens;
}

std::string lever_line(const GapLever& l, const Plan& before, bool sd_auto, bool taken) {
    const double t = per_step(l, before.tokens);
    std::string what = core::strfmt("%.2f s", l.iteration_s);
    if (l.tokens != before.tokens)
        what += core::strfmt(" per %.0f tokens = %.2f s per %.0f", l.tokens, t, before.tokens);
    std::string how;
    if (!l.fits)
        how = " (does not fit)";
    else if (l.chosen)
        how = " (chosen: the deck's optimizer.state_dtype is auto; convergence against fp32 "
              "moments: docs/optimizer-plugins.md)";
    else if (l.settings.rfind("optimizer.state_dtype=", 0) == 0)
        how = sd_auto ? (taken ? " (not taken: not more than 2% faster than the chosen format)"
                               : " (not taken: not more than 5% faster)")
                      : " (set it, or optimizer.state_dtype: auto to let the planner choose)";
    else if (l.tokens != before.tokens)
        how = " (more tokens per step change the optimization: the deck decides)";
    else
        how = " (the same tokens per step in larger micro-batches: set it where the activations "
              "fit, as the lever's plan says)";
    return core::strfmt("gap lever: %s: %s (%+.0f%%), tail buckets %d%s", l.settings.c_str(),
                        what.c_str(), 100.0 * (t / before.iteration_s - 1), l.tail_buckets,
                        how.c_str());
}

// The chosen plan's why-line for its moments (it was priced with the format fixed).
void explain_choice(Plan& q, const Plan& before) {
    const std::string line = core::strfmt(
        "optimizer state: %s moments: the CPU step is exposed (%.2f s of the %.2f s step with "
        "%s moments, host %s); %s moments shorten the step to %.2f s (tail buckets %d -> %d; "
        "host %s; convergence against fp32 moments: docs/optimizer-plugins.md)",
        state_dtype_name(q.state_dtype), before.exposed_s - before.comm_exposed_s,
        before.iteration_s, state_dtype_name(before.state_dtype),
        size_text(before.mem.host_total).c_str(), state_dtype_name(q.state_dtype), q.iteration_s,
        before.tail_buckets, q.tail_buckets, size_text(q.mem.host_total).c_str());
    for (ModeChoice& mc : q.mode_choices)
        if (mc.key == "optimizer.state_dtype") {
            mc.from_deck = false;
            mc.line = line;
            mc.other = {std::string("optimizer.state_dtype=") +
                        state_dtype_name(before.state_dtype)};
            mc.other_host_bytes = before.mem.host_total;
            mc.other_device_bytes = before.mem.total;
            mc.other_step_s = before.iteration_s - before.comm_exposed_s;
        }
    q.notes.push_back(line);
    q.auto_notes.push_back(line);
}

} // namespace

void close_gap(Plan& p, const config::Config& cfg, const model::ArchConfig& model,
               const HardwareProfile& hw, int shard_ranks) {
    if (!cfg.offload.enabled || cfg.offload.schedule != config::Schedule::SuperOffload || !p.fits)
        return; // (a plan that does not fit says what would make it fit instead)
    const double gap = p.exposed_s - p.comm_exposed_s;
    if (gap <= kGap * p.iteration_s) return;
    const bool sd_auto = cfg.optimizer.state_dtype == config::StateDtype::Auto;
    std::vector<GapLever> levers;
    Plan best;
    int best_i = -1;
    for (config::StateDtype f : leaner(p.state_dtype)) { // leaner moments (more tail buckets fit)
        config::Config c2 = cfg;
        c2.optimizer.state_dtype = f;
        Plan q = plan_once(c2, model, hw, shard_ranks);
        levers.push_back(lever_of(q, std::string("optimizer.state_dtype=") + state_dtype_name(f)));
        // a leaner format must beat the one before it by more than kTie (else keep precision)
        const double bar = best_i < 0 ? p.iteration_s * (1 - kGap) : best.iteration_s * (1 - kTie);
        if (q.fits && q.iteration_s < bar) best = std::move(q), best_i = int(levers.size()) - 1;
    }
    // The CPU pipeline overlaps the last micro-batch's backward only (the step needs the summed
    // grads): a larger micro-batch with the same tokens per step hides more of it; more
    // accumulation only spreads it over more tokens.
    const int B = cfg.train.batch_size, ga = std::max(1, cfg.train.grad_accum);
    auto add = [&](int batch, int accum, bool lean) {
        config::Config c2 = cfg;
        c2.train.batch_size = batch;
        c2.train.grad_accum = accum;
        std::string s = core::strfmt("train.batch_size=%d + train.grad_accum=%d", batch, accum);
        if (lean) {
            c2.optimizer.state_dtype = best.state_dtype;
            s += std::string(" + optimizer.state_dtype=") + state_dtype_name(best.state_dtype);
        }
        levers.push_back(lever_of(plan_once(c2, model, hw, shard_ranks), s));
    };
    int mmax = 1; // the largest power of two dividing the accumulation (all of it, usually)
    while (ga % (2 * mmax) == 0)
        mmax *= 2;
    if (mmax > 1) add(B * mmax, ga / mmax, false);
    if (mmax > 1 && best_i >= 0) add(B * mmax, ga / mmax, true);
    add(B, 2 * ga, false);
    const Plan before = p;
    if (sd_auto && best_i >= 0) {
        levers[static_cast<size_t>(best_i)].chosen = true;
        p = std::move(best);
        p.before_s = before.iteration_s;
        explain_choice(p, before);
    }
    p.levers = levers;
    p.notes.push_back(core::strfmt(
        "gap: the CPU side (optimizer step %.2f s, transfers %.2f s, all %.3f B params) outlasts "
        "forward+backward (%.2f s): %.2f s of the %.2f s step exposed with %s moments and %d "
        "tail buckets (%s); what closes it (each lever's own plan: predicted step, change per "
        "%.0f tokens):",
        before.optimizer_s, before.transfer_s, before.num_params / 1e9, before.compute_s, gap,
        before.iteration_s, state_dtype_name(before.state_dtype), before.tail_buckets,
        cfg.offload.gpu_tail_buckets >= 0 ? "set in the deck" : "chosen by the planner",
        before.tokens));
    for (const GapLever& l : levers)
        p.notes.push_back(lever_line(l, before, sd_auto, p.before_s > 0));
    if (model.moe())
        p.notes.push_back("gap: expert units ordered for the overlap: not modeled (the CPU steps "
                          "every bucket at the same rate, whatever expert it holds)");
}

} // namespace sof::plan
