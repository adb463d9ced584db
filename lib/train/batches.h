// Run details the trainer derives from the deck: data.eos_id for packing, and the step log's
// elapsed/ETA text (the batch geometry is config/batch.h).
#pragma once

#include <string>

#include "config/config.h"

namespace sof::train {

// data.eos_id for packing: the deck's value when >= 0 (or when data.pack is off); -1 (auto): the
// eos_token_id of prepare.json in the directory of data.train's first shard, else of
// model.init_from's config.json (a Hugging Face directory; the first id of a list); -1 when every
// input of data.train and data.val is a Megatron dataset (its index lists the documents). Throws
// Config naming the files looked at when none has one.
int resolve_eos_id(const config::Config& cfg);

// "1h02m03s", "4m05s", "12.3s"
std::string format_duration(double seconds);

} // namespace sof::train
