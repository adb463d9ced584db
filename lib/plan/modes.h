// The planner's engine modes (internal to lib/plan): offload.flow_grads, offload.cast,
// offload.rollback and optimizer.state_dtype decided together, then explained from the final plan.
#pragma once

#include <vector>

#include "plan/cost.h"
#include "plan/planner.h"

namespace sof::plan {

// Tail buckets for c's modes (planner.cpp): the deck's count, else Eq. 4-5 and the whole bucket
// pipeline within memory; adds its why-line to p.notes.
int choose_tail(const CostInputs& c, const HardwareProfile& hw, config::WeightsPolicy w,
                const config::Config& cfg, Plan& p);

// "958.95 GB", or "12.34 MB" below a GB (test decks): the sizes the why-lines quote.
std::string size_text(double bytes);

// The placement stride for memory plans: the interleaved schedule's k, else 0.
int stride_of(const config::Config& cfg, const Plan& p);

// Decides p.flow_grads, p.cast, p.rollback and p.state_dtype (the deck's value where it is not
// `auto`) once p.weights and p.interleave_k are final, and sets c's modes to them. flow grads and
// cast are decided with the host modes that end up chosen: the three decisions run again while
// the host modes they saw change (at most three passes). Returns the choices with their
// why-lines, built from the final modes: every figure a line quotes for the plan is the final
// plan's (host and device totals at the tail count make_plan then chooses, the deck's
// schedule's step), and for an `auto` choice the alternative's are those of the plan with only
// that choice flipped (every other choice as made, its own tail count).
std::vector<ModeChoice> resolve_modes(CostInputs& c, const HardwareProfile& hw,
                                      const config::Config& cfg, Plan& p);

} // namespace sof::plan
