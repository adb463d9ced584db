// LR schedules (constant, linear, cosine, wsd with min_lr and warmup) against their closed forms,
// the deck warnings, train.global_batch -> batch_size x grad_accum, and the step log's durations.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "config/batch.h"
#include "config/deck.h"
#include "core/error.h"
#include "train/batches.h"
#include "train/schedule.h"

using namespace sof;
using config::LrSchedule;

namespace {

config::TrainConfig tc(LrSchedule s, int steps, int warmup, float lr = 1.0f, float min_lr = 0.1f) {
    config::TrainConfig t;
    t.schedule = s;
    t.steps = steps;
    t.warmup_steps = warmup;
    t.lr = lr;
    t.min_lr = min_lr;
    return t;
}

} // namespace

TEST_CASE("schedules: warmup, then constant / linear / cosine / wsd down to min_lr") {
    for (LrSchedule s :
         {LrSchedule::Constant, LrSchedule::Linear, LrSchedule::Cosine, LrSchedule::Wsd}) {
        const config::TrainConfig t = tc(s, 100, 10);
        for (int i = 0; i < 10; i++) // warmup: lr * (i + 1) / W
            CHECK(train::lr_at(t, i) == doctest::Approx((i + 1) / 10.0));
    }
    const config::TrainConfig c = tc(LrSchedule::Constant, 100, 10);
    CHECK(train::lr_at(c, 50) == 1.0f);
    CHECK(train::lr_at(c, 99) == 1.0f);
    // linear / cosine: the 90 decay steps 10..99, decay step k = step - 9 at x = k / 90
    const config::TrainConfig l = tc(LrSchedule::Linear, 100, 10);
    CHECK(train::lr_at(l, 10) == doctest::Approx(1.0 - 0.9 * 1.0 / 90.0));
    CHECK(train::lr_at(l, 54) == doctest::Approx(0.1 + 0.9 * (1.0 - 45.0 / 90.0)));
    CHECK(train::lr_at(l, 98) == doctest::Approx(0.1 + 0.9 / 90.0));
    CHECK(train::lr_at(l, 99) == doctest::Approx(0.1));  // the last step: min_lr
    CHECK(train::lr_at(l, 150) == doctest::Approx(0.1)); // past the end: min_lr
    const config::TrainConfig co = tc(LrSchedule::Cosine, 100, 10);
    CHECK(train::lr_at(co, 10) ==
          doctest::Approx(0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * 1.0 / 90.0))));
    CHECK(train::lr_at(co, 54) == doctest::Approx(0.1 + 0.9 * 0.5)); // half way: the middle
    CHECK(train::lr_at(co, 39) ==
          doctest::Approx(0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * 30.0 / 90.0))));
    CHECK(train::lr_at(co, 99) == doctest::Approx(0.1));
    // wsd: decay_fraction 0.2 of 100 steps -> steps 80..99 decay; step 99 is at min_lr
    const config::TrainConfig w = tc(LrSchedule::Wsd, 100, 10);
    CHECK(train::wsd_decay_start(w) == 80);
    CHECK(train::lr_at(w, 79) == 1.0f);
    CHECK(train::lr_at(w, 80) == doctest::Approx(1.0 - 0.9 * 1.0 / 20.0));
    CHECK(train::lr_at(w, 89) == doctest::Approx(1.0 - 0.9 * 10.0 / 20.0));
    CHECK(train::lr_at(w, 99) == doctest::Approx(0.1));
    // the decay never starts inside warmup
    config::TrainConfig w2 = tc(LrSchedule::Wsd, 20, 18);
    w2.decay_fraction = 0.5f;
    CHECK(train::wsd_decay_start(w2) == 18);
    CHECK(train::lr_at(w2, 19) == doctest::Approx(0.1));
    // warmup covering the whole run: still warmup, no decay (and a deck warning)
    const config::TrainConfig all = tc(LrSchedule::Cosine, 5, 10);
    CHECK(train::lr_at(all, 4) == doctest::Approx(0.5));
}

TEST_CASE("every decay takes min_lr on the last step and not before; warmup reaches lr") {
    // one convention for linear, cosine and wsd (torchtitan's): step steps-1 runs at min_lr,
    // step steps-2 above it, the lr never rises after warmup, and warmup's last step is lr
    for (LrSchedule s : {LrSchedule::Linear, LrSchedule::Cosine, LrSchedule::Wsd})
        for (int steps : {2, 3, 7, 100, 1001})
            for (int warmup : {0, 1, 5}) {
                if (warmup >= steps) continue;
                for (float frac : {0.1f, 0.2f, 1.0f}) {
                    config::TrainConfig t = tc(s, steps, warmup, 1.0f, 0.1f);
                    t.decay_fraction = frac;
                    CAPTURE(static_cast<int>(s));
                    CAPTURE(steps);
                    CAPTURE(warmup);
                    CAPTURE(frac);
                    const int d0 = s == LrSchedule::Wsd ? train::wsd_decay_start(t) : warmup;
                    if (d0 >= steps) continue; // wsd with no decay step
                    CHECK(train::lr_at(t, steps - 1) == doctest::Approx(0.1));
                    if (steps - 1 > d0) CHECK(train::lr_at(t, steps - 2) > 0.1f + 1e-6f);
                    if (warmup > 0) CHECK(train::lr_at(t, warmup - 1) == doctest::Approx(1.0));
                    // the first decay step is already below lr (decay step 1 of D)
                    CHECK(train::lr_at(t, d0) < 1.0f);
                    for (int i = warmup; i + 1 < steps; i++)
                        CHECK(train::lr_at(t, i + 1) <= train::lr_at(t, i));
                }
            }
}

TEST_CASE("deck warnings: warmup_steps >= steps, min_lr without a decay") {
    config::Config cfg;
    CHECK(config::deck_warnings(cfg).empty());
    cfg.train.steps = 10;
    cfg.train.warmup_steps = 10;
    auto w = config::deck_warnings(cfg);
    REQUIRE(w.size() == 1);
    CHECK(w[0].find("train.warmup_steps = 10 >= train.steps = 10") != std::string::npos);
    cfg.train.warmup_steps = 2;
    cfg.train.min_lr = 1e-4f;
    w = config::deck_warnings(cfg);
    REQUIRE(w.size() == 1);
    CHECK(w[0].find("train.min_lr") != std::string::npos);
    cfg.train.schedule = LrSchedule::Wsd;
    CHECK(config::deck_warnings(cfg).empty());
}

TEST_CASE("train.global_batch: batch_size x grad_accum for each data-parallel rank count") {
    config::TrainConfig t;
    t.batch_size = 8;
    t.grad_accum = 1;
    auto g = config::resolve_batch(t, 4); // not stated: the deck's values
    CHECK((g.batch_size == 8 && g.grad_accum == 1 && g.note.empty()));
    t.global_batch = 64;
    g = config::resolve_batch(t, 1);
    CHECK((g.batch_size == 8 && g.grad_accum == 8));
    g = config::resolve_batch(t, 4);
    CHECK((g.batch_size == 8 && g.grad_accum == 2));
    g = config::resolve_batch(t, 8);
    CHECK((g.batch_size == 8 && g.grad_accum == 1 && g.note.empty()));
    g = config::resolve_batch(t, 16); // 4 per rank: batch_size lowered
    CHECK((g.batch_size == 4 && g.grad_accum == 1));
    CHECK(g.note.find("batch_size lowered") != std::string::npos);
    t.global_batch = 24;
    t.batch_size = 5;
    g = config::resolve_batch(t, 2); // 12 per rank: 4 x 3
    CHECK((g.batch_size == 4 && g.grad_accum == 3));
    try {
        config::resolve_batch(t, 5);
        FAIL("24 sequences over 5 ranks must be refused");
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        CHECK(std::string(e.what()).find("multiple of 5 (e.g. 20 or 25)") != std::string::npos);
    }
}

TEST_CASE("durations for the step log") {
    CHECK(train::format_duration(12.34) == "12.3s");
    CHECK(train::format_duration(245) == "4m05s");
    CHECK(train::format_duration(3723) == "1h02m03s");
    CHECK(train::format_duration(-1) == "?");
}
