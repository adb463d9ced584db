// Loading a YAML input deck into Config: parsing, --set overrides, validation with
// file:line:key messages (and the nearest valid key for typos), and the effective-deck echo.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace sof::config {

enum class DeckChecks {
    All,     // everything, including the run's files (data shards, init_from, output dirs)
    NoFiles, // shapes, policies and cross-key checks only (`plan`: no data or output needed)
};

// Reads and validates a deck file, then applies the overrides ("key=value", in order).
// Io error if the file cannot be read; Config error for anything wrong inside it.
Config load_deck(const std::string& path, const std::vector<std::string>& overrides,
                 DeckChecks checks = DeckChecks::All);

// Reads a YAML input file (a deck, a hardware profile): regular files only (not a FIFO, device or
// directory) of at most kMaxDeckBytes. `what` names it in messages ("deck"). Throws Io.
constexpr long long kMaxDeckBytes = 1ll << 20;
std::string read_yaml_file(const std::string& path, const char* what);

// Same for deck text held in memory; `name` stands for the file name in messages.
Config load_deck_from_string(const std::string& yaml, const std::string& name,
                             const std::vector<std::string>& overrides,
                             DeckChecks checks = DeckChecks::All);

// Parses deck text without validating it and skipping unknown keys: for decks written by this or
// another superoffload version (a checkpoint's deck.yaml), not for user input. Type and range
// errors of known keys still throw Config.
Config parse_deck_text(const std::string& yaml, const std::string& name);

// The full effective deck: every key (defaults included), grouped by section. Valid YAML that
// load_deck_from_string accepts back, giving the same Config (round trip is exact).
std::string effective_yaml(const Config& cfg);

// Things in a valid deck that are probably not what the user meant: values that load but lie far
// outside any sane range (train.lr = 2e9, weight_decay = 5, ...: naming where the key was set, the
// value and the usual range), warmup_steps >= steps (the run never leaves warmup), keys of a
// schedule that is not selected. One sentence each, naming the keys and the fix; empty when there
// is nothing to say. `check`, `plan` and `train` print them (values that cannot work are refused
// by load_deck instead).
std::vector<std::string> deck_warnings(const Config& cfg);

// Every key the deck understands, dotted ("train.lr", "data.builtin.seed", ...), in deck order.
std::vector<std::string> all_keys();

} // namespace sof::config
