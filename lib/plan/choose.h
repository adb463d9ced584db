// The planner's placement choices (internal to lib/plan): bucket size and interleave stride from
// the link, weights stationary or flow, tail buckets; and the one price of a candidate plan.
#pragma once

#include <string>

#include "plan/cost.h"
#include "plan/planner.h"

namespace sof::plan {

// The figures of one candidate: c's engine modes with p's weights and interleave stride, at the
// tail count the plan would choose for them.
struct Priced {
    int tail = 0;          // tail buckets (the deck's, else Eq. 4-5 and the pipeline in memory)
    std::string tail_note; // why that count
    MemoryEstimate mem;    // the engine's memory there (placed with stride_of)
    double step = 0;       // the deck's schedule's step, seconds (collectives not included)
};

// Prices c's modes for p's weights and stride: what the mode decisions compare (modes.cpp) and
// what the plan then reports for the modes chosen (pass.cpp), computed the same way once.
Priced price(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
             const Plan& p);

// The placement stride for memory plans: the interleaved schedule's k, else 0.
int stride_of(const config::Config& cfg, const Plan& p);

// Sets p.bucket_mb (the link's saturation point), p.interleave_k(_raw) (DOS Eq. 1, or the
// deck's) and p.flow_efficiency (paper Eq. 3 with this engine's fetch); adds their why-lines.
void choose_link(const CostInputs& c, const HardwareProfile& hw, const config::Config& cfg,
                 Plan& p);

// Sets p.weights: the deck's, else stationary when it fits the device, else weight flow; adds
// its why-line.
void choose_weights(const CostInputs& c, const config::Config& cfg, Plan& p);

} // namespace sof::plan
