// Learning-rate schedules: linear warmup, then constant, linear, cosine or warmup-stable-decay
// (WSD) to min_lr. Pure functions of the step so resume needs no schedule state.
#pragma once

#include "config/config.h"

namespace sof::train {

// lr for 0-based optimizer step `step` of `cfg.steps` (docs/deck.md, train.schedule):
//   warmup  (step < W): lr * (step + 1) / W
//   constant: lr
//   linear:   lr -> min_lr, linearly over steps W .. steps
//   cosine:   lr -> min_lr, half a cosine over steps W .. steps
//   wsd:      lr until the last D = round(decay_fraction * steps) steps (never before W), then
//             linearly down: decay step k (1..D) takes lr - k/D (lr - min_lr), the last min_lr
// Steps past `steps` stay at the end value (min_lr; lr for constant).
float lr_at(const config::TrainConfig& cfg, int step);

// The first step of the wsd decay (= steps when decay_fraction rounds to no step).
int wsd_decay_start(const config::TrainConfig& cfg);

} // namespace sof::train
