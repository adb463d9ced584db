// Learning-rate schedules (see schedule.h).
// Warmup is linear from lr/warmup to lr (as llm.c); every decay ends at min_lr on the last step.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace sof::train {

namespace {

// Where `step` stands in [begin, end): 0 at begin, 1 at end and after; 1 when the span is empty.
double progress(int step, int begin, int end) {
    if (end <= begin) return 1.0;
    const double r = static_cast<double>(step - begin) / static_cast<double>(end - begin);
    return std::clamp(r, 0.0, 1.0);
}

float towards_min(const config::TrainConfig& cfg, double coeff) { // coeff 1: lr, 0: min_lr
    return static_cast<float>(cfg.min_lr + coeff * (cfg.lr - cfg.min_lr));
}

} // namespace

int wsd_decay_start(const config::TrainConfig& cfg) {
    const int d =
        static_cast<int>(std::lround(static_cast<double>(cfg.decay_fraction) * cfg.steps));
    return std::max(cfg.warmup_steps, cfg.steps - d);
}

float lr_at(const config::TrainConfig& cfg, int step) {
    if (cfg.warmup_steps > 0 && step < cfg.warmup_steps)
        return cfg.lr * static_cast<float>(step + 1) / static_cast<float>(cfg.warmup_steps);
    if (cfg.schedule == config::LrSchedule::Constant) return cfg.lr;
    // the decay's D steps d0 .. steps-1: decay step k = step - d0 + 1 (1..D) is at progress k/D,
    // so the last step of the run takes min_lr
    const int d0 =
        cfg.schedule == config::LrSchedule::Wsd ? wsd_decay_start(cfg) : cfg.warmup_steps;
    if (step < d0 || d0 >= cfg.steps) return cfg.lr; // stable (wsd), or never leaves warmup
    const double x = progress(step + 1, d0, cfg.steps);
    if (cfg.schedule == config::LrSchedule::Cosine)
        return towards_min(cfg, 0.5 * (1.0 + std::cos(M_PI * x)));
    return towards_min(cfg, 1.0 - x); // linear, wsd
}

} // namespace sof::train
