// The model a deck trains, from where it is described: model.init_from's Hugging Face config.json
// or llm.c header, else the deck's model keys. One function for `train`, `plan` and `check`.
#pragma once

#include <string>

#include "config/config.h"
#include "model/layout.h"

namespace sof::ckpt {

// The architecture of `cfg`'s model (reading only model.init_from's config.json or llm.c header,
// no weights), with the deck's model keys set to describe it (the effective deck names the model
// trained) and the dropout keys' auto resolved to the model's rates. `source` (optional) gets a
// line for the log: "" for a deck model, else where the architecture came from.
model::ArchConfig resolve_model(config::Config* cfg, std::string* source = nullptr);

// The model against the run: model::validate with parallel.sp and train.seq_len, and
// train.seq_len within the model's max_seq_len (Config errors naming the keys).
void check_run_shape(const config::Config& cfg, const model::ArchConfig& m);

} // namespace sof::ckpt
