// The deck's key table: one Field per key, bound to a Config's member, with its type, allowed
// values and range. Parsing a value into a field and formatting it back both go through here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace sof::config {

// An enum member seen through its index in Field::choices.
struct EnumRef {
    std::function<int()> get;
    std::function<void(int)> set;
};

using FieldTarget = std::variant<int*, int64_t*, uint64_t*, float*, double*, bool*, std::string*,
                                 std::vector<int>*, EnumRef>;

// Numeric bounds of a field; open ends exclude the bound.
struct Range {
    bool has_min = false, has_max = false;
    double min = 0.0, max = 0.0;
    bool min_open = false, max_open = false;
};

// What a resume does when the key differs between the checkpoint's run and this one
// (ckpt/compat.h: the check takes its keys from here, so a renamed key cannot drop out of it).
enum class Resume {
    Free,  // may change (the LR schedule, steps, logging, offload keys): reported in the log
    Match, // must match: it defines the data stream or the optimizer state (the resume refuses)
    Arch,  // an architecture key: compared from the manifest (the model actually built)
    Never, // not compared (train.resume itself)
};

struct Field {
    std::string key;                  // dotted: "train.lr"
    FieldTarget target;               // the member it reads and writes
    std::vector<std::string> choices; // enums and string choices: the allowed spellings
    std::vector<long long> int_set;   // ints restricted to a set (parallel.zero_stage)
    Range range;                      // ints, floats and list elements
    bool auto_ok = false;             // ints: "auto" is accepted and stored as -1
    Resume resume = Resume::Free;     // resume policy (see Resume)
};

// The key table bound to `cfg` (pointers into it), in deck order. Cheap; build one per use.
std::vector<Field> bind_fields(Config& cfg);

// Where a value came from, for messages: "deck.yaml:3" (from_file) or "--set k=v".
struct Origin {
    std::string where;
    bool from_file = true;
};

// Parses `text` (a YAML scalar, `is_null` for an empty value) into the field. Throws a Config
// error "<where>: <key>: expected ..., got '...'" or "<where>: <key> = v is out of range ...".
void set_scalar(const Field& f, const std::string& text, bool is_null, const Origin& at);

// Sets a list field from its elements (each a scalar text).
void set_list(const Field& f, const std::vector<std::string>& items, const Origin& at);

// The field's current value as YAML text ("0.001", "cosine", "\"\"", "[1, 2]").
std::string format_value(const Field& f);

// What the field expects, for messages and docs: "an integer", "one of constant|cosine", ...
std::string describe_type(const Field& f);

// The range as text: "[0, 1)", ">= 0", "> 0"; empty when unbounded.
std::string describe_range(const Range& r);

// Levenshtein distance (for "did you mean").
int edit_distance(const std::string& a, const std::string& b);

// The nearest candidate to `word` when it is close enough to be a likely typo, else "".
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// Shortest decimal text that reads back to exactly the same value.
std::string format_float(float v);
std::string format_double(double v);

// Double-quotes a string for YAML when it would not read back as the same plain string.
std::string yaml_quote(const std::string& s);

} // namespace sof::config
