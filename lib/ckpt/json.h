// A small JSON reader for checkpoint manifests: objects, arrays, strings, integers, booleans,
// null. Parse errors name the source and line; lookups of missing keys name the key.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sof::ckpt {

struct JsonValue {
    enum class Type { Null, Bool, Int, String, Array, Object };
    Type type = Type::Null;
    bool b = false;
    int64_t i = 0;
    std::string s;
    std::vector<JsonValue> arr;
    std::map<std::string, JsonValue> obj;
    int line = 0; // line where the value starts (for messages)
};

// Parses `text`; `source` (a file path) prefixes every error. Throws core::Error(Format).
// Numbers must be integers (manifests hold no floats).
JsonValue json_parse(const std::string& text, const std::string& source);

// Typed lookups in an object; a missing key or a wrong type throws Format naming source + key.
const JsonValue& json_get(const JsonValue& obj, const std::string& key, const std::string& source);
int64_t json_int(const JsonValue& obj, const std::string& key, const std::string& source);
std::string json_str(const JsonValue& obj, const std::string& key, const std::string& source);
const JsonValue& json_arr(const JsonValue& obj, const std::string& key, const std::string& source);

// Quotes and escapes a string for JSON output ("a\"b\n" -> "\"a\\\"b\\n\"").
std::string json_quote(const std::string& s);

} // namespace sof::ckpt
