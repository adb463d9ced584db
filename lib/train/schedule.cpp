// Learning-rate schedules (see schedule.h).
// Warmup is linear from lr/warmup to lr (as llm.c); every decay ends at min_lr at train.steps.
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
    const int w = cfg.warmup_steps;
    switch (cfg.schedule) {
    case config::LrSchedule::Constant:
        return cfg.lr;
    case config::LrSchedule::Linear:
        if (cfg.steps <= w) return cfg.lr; // never leaves warmup (the deck warns)
        return towards_min(cfg, 1.0 - progress(step, w, cfg.steps));
    case config::LrSchedule::Cosine:
        if (cfg.steps <= w) return cfg.lr;
        return towards_min(cfg, 0.5 * (1.0 + std::cos(M_PI * progress(step, w, cfg.steps))));
    case config::LrSchedule::Wsd: {
        const int d0 = wsd_decay_start(cfg);
        if (step < d0 || d0 >= cfg.steps) return cfg.lr;
        // the D decay steps end at min_lr: step steps-1 takes it
        return towards_min(cfg, 1.0 - progress(step + 1, d0, cfg.steps));
    }
    }
    return cfg.lr;
}

} // namespace sof::train
