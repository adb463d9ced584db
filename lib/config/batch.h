// Batch geometry of a run: train.global_batch turned into per-rank batch_size x grad_accum for a
// rank count, resolved before anything is sized from it (the planner and the engine alike).
#pragma once

#include <string>

#include "config/config.h"

namespace sof::config {

struct BatchGeometry {
    int batch_size = 0; // sequences per micro-batch per rank
    int grad_accum = 0; // micro-batches per optimizer step
    std::string note;   // what was derived and why ("" when the deck's values stand)
};

// The deck's batch_size x grad_accum when train.global_batch is 0; else the split of
// global_batch sequences over `dp` data-parallel ranks: grad_accum = global_batch / (dp x
// batch_size), with batch_size lowered to the largest divisor of global_batch / dp that is <= the
// deck's when it does not divide. Throws Config (naming the keys and values that would work) when
// global_batch is not a multiple of dp.
BatchGeometry resolve_batch(const TrainConfig& t, int dp);

// Resolves the geometry of a job of `world` ranks (world / parallel.sp data-parallel ranks) and
// writes train.batch_size and train.grad_accum into cfg (idempotent: global_batch stays). `train`
// calls it before it plans and builds the engine, `plan` before it plans (--ranks N), so both
// size the same micro-batch and accumulation. Returns the note ("" when the deck's values stand).
std::string apply_batch_geometry(Config& cfg, int world);

} // namespace sof::config
