// The CPU-step gap (internal to lib/plan): when the optimizer step or the transfers it needs
// outlast forward and backward, which deck changes close it, and the one the planner may take.
#pragma once

#include "plan/planner.h"

namespace sof::plan {

// When p (the deck's superoffload schedule; a plan that fits) exposes more than 5% of its step,
// prices the levers (leaner moments, the same tokens in larger micro-batches, more tokens per
// step) with plan_once (pass.h), and takes the fastest leaner moments format when the deck's
// optimizer.state_dtype is `auto` and it shortens the step by more than 5% (p becomes that
// plan, p.before_s the step it replaces). Adds the why-lines.
void close_gap(Plan& p, const config::Config& cfg, const model::ArchConfig& model,
               const HardwareProfile& hw, int shard_ranks);

} // namespace sof::plan
