// Learning-rate schedules (see schedule.h).
// Warmup is linear from lr/warmup to lr (as llm.c), cosine goes from lr to min_lr over the rest.
#include "train/schedule.h"

#include <cmath>

namespace sof::train {

float lr_at(const config::TrainConfig& cfg, int step) {
    if (cfg.warmup_steps > 0 && step < cfg.warmup_steps)
        return cfg.lr * static_cast<float>(step + 1) / static_cast<float>(cfg.warmup_steps);
    if (cfg.schedule == config::LrSchedule::Constant) return cfg.lr;
    int decay_steps = cfg.steps - cfg.warmup_steps;
    if (decay_steps <= 0) return cfg.lr;
    double ratio = static_cast<double>(step - cfg.warmup_steps) / static_cast<double>(decay_steps);
    if (ratio > 1.0) ratio = 1.0;
    double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
    return static_cast<float>(cfg.min_lr + coeff * (cfg.lr - cfg.min_lr));
}

} // namespace sof::train
