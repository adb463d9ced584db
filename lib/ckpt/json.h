// JSON for checkpoint manifests through nlohmann-json: parsing with errors that name the file,
// typed lookups whose errors name the key, and string quoting for the writer.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace sof::ckpt {

using Json = nlohmann::json;

// Parses `text`; `source` (a file path) prefixes every error. Throws core::Error(Format) for
// invalid JSON, an empty file ("unexpected end of file"), text after the document ("after the
// end") and duplicate keys (nlohmann would keep the last one silently).
Json json_parse(const std::string& text, const std::string& source);

// Typed lookups in an object; a missing key or a wrong type throws Format naming source + key.
// json_int accepts integers that fit in int64 only (no floats, no larger unsigned values).
// The two that return a reference into obj take the key as a C string: no temporary argument
// (GCC 13's -Wdangling-reference warns on any; pass `source` as a named string too).
const Json& json_get(const Json& obj, const char* key, const std::string& source);
int64_t json_int(const Json& obj, const std::string& key, const std::string& source);
std::string json_str(const Json& obj, const std::string& key, const std::string& source);
const Json& json_arr(const Json& obj, const char* key, const std::string& source);

// Quotes and escapes a string for JSON output ("a\"b\n" -> "\"a\\\"b\\n\""); bytes that are not
// valid UTF-8 are replaced by U+FFFD instead of throwing.
std::string json_quote(const std::string& s);

} // namespace sof::ckpt
