// Batch geometry (see batch.h): train.global_batch -> batch_size x grad_accum per rank count.
// Pure functions of the deck; the trainer and the planner both apply them first.
#include "config/batch.h"

#include <algorithm>

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::config {

BatchGeometry resolve_batch(const TrainConfig& t, int dp) {
    BatchGeometry g{t.batch_size, t.grad_accum, ""};
    if (t.global_batch <= 0) return g;
    const int G = t.global_batch;
    if (dp < 1) SOF_FAIL(Internal, "resolve_batch: %d data-parallel ranks", dp);
    if (G % dp != 0) {
        const int lower = G / dp * dp, upper = lower + dp;
        const std::string eg =
            lower > 0 ? core::strfmt("%d or %d", lower, upper) : core::strfmt("%d", upper);
        SOF_FAIL(Config,
                 "train.global_batch = %d sequences cannot be split evenly over %d data-parallel "
                 "rank(s) (ranks / parallel.sp): set train.global_batch to a multiple of %d "
                 "(e.g. %s), or run on a rank count whose data-parallel part divides %d",
                 G, dp, dp, eg.c_str(), G);
    }
    const int per_rank = G / dp;
    int b = std::min(t.batch_size, per_rank);
    while (per_rank % b != 0)
        b--;
    g.batch_size = b;
    g.grad_accum = per_rank / b;
    if (g.batch_size != t.batch_size || g.grad_accum != t.grad_accum)
        g.note = core::strfmt(
            "train.global_batch = %d over %d data-parallel rank(s): %d sequences per rank = "
            "batch_size %d x grad_accum %d (the deck says batch_size %d, grad_accum %d)%s",
            G, dp, per_rank, g.batch_size, g.grad_accum, t.batch_size, t.grad_accum,
            g.batch_size != t.batch_size
                ? core::strfmt("; batch_size lowered: %d does not divide %d", t.batch_size,
                               per_rank)
                      .c_str()
                : "");
    return g;
}

std::string apply_batch_geometry(Config& cfg, int world) {
    const int dp = std::max(1, world) / std::max(1, cfg.parallel.sp);
    const BatchGeometry g = resolve_batch(cfg.train, std::max(1, dp));
    cfg.train.batch_size = g.batch_size;
    cfg.train.grad_accum = g.grad_accum;
    return g.note;
}

} // namespace sof::config
