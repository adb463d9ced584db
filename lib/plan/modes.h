// The planner's engine modes (internal to lib/plan): offload.flow_grads, offload.cast,
// offload.rollback and optimizer.state_dtype decided together, then explained from the final plan.
#pragma once

#include <vector>

#include "plan/choose.h"
#include "plan/cost.h"
#include "plan/planner.h"

namespace sof::plan {

// "958.95 GB", or "12.34 MB" below a GB (test decks): the sizes the why-lines quote.
std::string size_text(double bytes);

// The engine modes decided: each choice with its why-line, and the price of the plan with them.
struct ModeDecision {
    std::vector<ModeChoice> choices; // flow grads (weight flow), cast, rollback, moments, master
    Priced plan;                     // c's final modes priced (choose.h): tail, memory, step
};

// Decides p.flow_grads, p.cast, p.rollback, p.state_dtype and p.master_dtype (the deck's value
// where it is not `auto`) once p.weights and p.interleave_k are final, and sets c's modes to
// them. flow grads and cast are decided with the host modes that end up chosen: the three
// decisions run again while the host modes they saw change (at most three passes). Every
// candidate is priced by choose.h's price(), the plan the pass then reports among them. The
// why-lines are built from the final modes: every figure a line quotes for the plan is the
// final plan's (host and device totals at its tail count, the deck's schedule's step), and for
// an `auto` choice the alternative's are those of the plan with only that choice flipped (every
// other choice as made, its own tail count).
ModeDecision resolve_modes(CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
                           Plan& p);

} // namespace sof::plan
