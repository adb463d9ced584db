// What could make a plan fit (internal to lib/plan): the settings a deck does not have already
// that lower device or host memory, as the "does not fit" why-lines quote them.
#pragma once

#include <string>

#include "config/config.h"
#include "plan/planner.h"

namespace sof::plan {

// What could make a plan with `weights` and `tail` tail buckets fit the device, among the
// settings the deck does not have already (weight flow, tail buckets, the interleave stride,
// bucket size, batch, recompute, offloaded checkpoints, tiles; a shorter sequence and more ranks
// always): "use a, b or c".
std::string device_memory_advice(const config::Config& cfg, config::WeightsPolicy weights,
                                 int tail);
// The same for host memory, with the plan's resolved modes: one state set (inverse rollback),
// bf16 moments, bf16 grads (cast host), checkpoints kept on the device, where the plan does not
// have them; a shorter sequence (with offloaded checkpoints) and more ranks always.
std::string host_memory_advice(const config::Config& cfg, const Plan& p);

} // namespace sof::plan
