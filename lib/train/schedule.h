// Learning-rate schedules: linear warmup, then constant, linear, cosine or warmup-stable-decay
// (WSD) to min_lr. Pure functions of the step so resume needs no schedule state.
#pragma once

#include "config/config.h"

namespace sof::train {

// lr for 0-based optimizer step `step` of `cfg.steps` (docs/deck.md, train.schedule):
//   warmup  (step < W): lr * (step + 1) / W          (step W-1 reaches lr)
//   constant: lr
//   decays over their D steps d0 .. steps-1, decay step k = step - d0 + 1 (1..D), x = k / D:
//   linear:   d0 = W, lr - x (lr - min_lr)
//   cosine:   d0 = W, min_lr + (lr - min_lr) (1 + cos(pi x)) / 2
//   wsd:      lr until d0 = steps - round(decay_fraction * steps) (never before W), then linear
// so every decay takes min_lr on the last step, steps-1 (torchtitan's convention; Megatron-LM
// and llm.c reach it one step later, at step == steps, which never runs).
// Steps past `steps` stay at the end value (min_lr; lr for constant).
float lr_at(const config::TrainConfig& cfg, int step);

// The first step of the wsd decay (= steps when decay_fraction rounds to no step).
int wsd_decay_start(const config::TrainConfig& cfg);

} // namespace sof::train
