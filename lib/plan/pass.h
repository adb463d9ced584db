// The planner's one pass (internal to lib/plan): deck + model + hardware -> cost inputs -> link,
// weights, engine modes, tail -> memory and fit -> schedule times -> collectives -> notes.
#pragma once

#include "plan/planner.h"

namespace sof::plan {

// The plan for exactly these deck values (make_plan without the CPU-step gap analysis, gap.h):
// each stage reads what the stages before it decided and nothing after it.
Plan plan_once(const config::Config& cfg, const model::ArchConfig& model, const HardwareProfile& hw,
               int shard_ranks);

} // namespace sof::plan
