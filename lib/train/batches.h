// Batch geometry of a run: train.global_batch turned into per-rank batch_size x grad_accum for
// this rank count, and the step log's elapsed/ETA text.
#pragma once

#include <string>

#include "config/config.h"

namespace sof::train {

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
BatchGeometry resolve_batch(const config::TrainConfig& t, int dp);

// data.eos_id for packing: the deck's value when >= 0 (or when data.pack is off); -1 (auto): the
// eos_token_id of prepare.json in the directory of data.train's first shard, else of
// model.init_from's config.json (a Hugging Face directory; the first id of a list). Throws Config
// naming the files looked at when none has one.
int resolve_eos_id(const config::Config& cfg);

// "1h02m03s", "4m05s", "12.3s"
std::string format_duration(double seconds);

} // namespace sof::train
