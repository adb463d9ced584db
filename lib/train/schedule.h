// Learning-rate schedules: constant, or linear warmup followed by cosine decay to min_lr.
// Pure functions of the step so resume needs no schedule state.
#pragma once

#include "config/config.h"

namespace sof::train {

// lr for 0-based optimizer step `step` of `cfg.steps`.
float lr_at(const config::TrainConfig& cfg, int step);

} // namespace sof::train
