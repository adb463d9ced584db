// The deck's model section and the architecture it describes: one mapping in each direction, and
// the deck-level validation (model::validate's errors located at the deck line that set the key).
#pragma once

#include "config/config.h"
#include "model/layout.h"

namespace sof::model {

// The deck's model as an ArchConfig: padded_vocab_size 0 = vocab_size rounded up to a multiple of
// 128; the LLaMA-family keys only for the LLaMA family; the architecture's fixed flags
// (apply_arch_defaults); the dropout keys' auto (-1) as 0. Not validated (validate /
// validate_deck).
ArchConfig config_for(const config::ModelConfig& m);

// The reverse: the architecture keys of `m` set to describe `a` (a model whose architecture came
// from a file: model.init_from), so that the effective deck names the model that is trained.
// config_for(*m) == a afterwards but for the dropout rates: model.attention_dropout and
// model.residual_dropout are the run's (auto: the model's), kept like init_from, init_std, ...
void set_deck_model(const ArchConfig& a, config::ModelConfig* m);

// validate(config_for(cfg.model), cfg.parallel.sp, cfg.train.seq_len) for a deck whose model
// comes from its keys (with model.init_from the file decides and the trainer validates it: only
// check_sequence_split here). A Config error is prefixed with where the first deck key it names
// was set ("deck.yaml:3: ..." or "--set model.num_heads=5: ..."), else with the deck's name.
void validate_deck(const config::Config& cfg);

} // namespace sof::model
