// Resume compatibility: a checkpoint continues only the run that wrote it. Compares the model
// architecture, data identity and optimizer keys recorded in the manifest (and its deck.yaml)
// with the deck of the resuming run; names every difference, allows deliberate changes.
#pragma once

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "config/config.h"
#include "model/layout.h"

namespace sof::ckpt {

struct DeckChange {
    std::string key;        // "train.lr", "model.num_heads", "data identity"
    std::string saved, now; // values as deck text
    bool allowed = false;   // false: the resume is refused
};

// The architecture keys (deck keys with the Arch resume policy) on which two models differ, each
// model spelled out (implied sizes explicit, scaling fields only when scaling is on): saved = a's
// value, now = b's.
std::vector<DeckChange> arch_differences(const model::ArchConfig& a, const model::ArchConfig& b);

// Every difference between the checkpoint's run and this one. `mcfg` is the architecture this
// run builds (after model.init_from). train.resume itself is never reported.
std::vector<DeckChange> compare_runs(const Manifest& m, const config::Config& cfg,
                                     const model::ArchConfig& mcfg, const std::string& data_id);

// compare_runs, then throws Error(Config) naming every refused difference (with both values and
// how to fix it) when there is any; returns the allowed ones (for the log) otherwise.
std::vector<DeckChange> check_resume(const std::string& dir, const Manifest& m,
                                     const config::Config& cfg, const model::ArchConfig& mcfg,
                                     const std::string& data_id);

// A fingerprint of the training data: "" for the built-in corpus (its deck keys identify it), else
// "shards=N bytes=B fnv1a64=H" over each shard's name, size and first and last MiB. Io error when a
// shard cannot be read.
std::string data_identity(const config::DataConfig& data);

} // namespace sof::ckpt
