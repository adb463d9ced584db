// Manifest JSON through nlohmann-json (see json.h): parse errors and lookups turned into
// core::Error(Format) messages that name the manifest file and the key.
#include "ckpt/json.h"

#include <set>
#include <vector>

#include "core/error.h"

namespace sof::ckpt {

namespace {

constexpr const char* kHint =
    "the manifest is corrupt or was edited by hand; restore it or resume from another checkpoint";

const char* type_name(const Json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number with a fraction or exponent";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "a binary value";
}

} // namespace

Json json_parse(const std::string& text, const std::string& source) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        SOF_FAIL(Format, "%s: unexpected end of file: the manifest is empty (%s)", source.c_str(),
                 kHint);
    // nlohmann keeps the last of duplicate keys; refuse them like any other corruption
    std::vector<std::set<std::string>> open;
    std::string duplicate;
    Json::parser_callback_t cb = [&](int, Json::parse_event_t ev, Json& parsed) {
        if (ev == Json::parse_event_t::object_start) {
            open.emplace_back();
        } else if (ev == Json::parse_event_t::object_end) {
            if (!open.empty()) open.pop_back();
        } else if (ev == Json::parse_event_t::key && !open.empty()) {
            const std::string& k = parsed.get_ref<const std::string&>();
            if (!open.back().insert(k).second && duplicate.empty()) duplicate = k;
        }
        return true;
    };
    Json root;
    try {
        root = Json::parse(text, cb, true, false);
    } catch (const Json::parse_error& e) {
        std::string what = e.what();
        // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> the tail
        size_t p = what.find("parse error");
        if (p != std::string::npos) what = what.substr(p);
        if (what.find("expected end of input") != std::string::npos)
            SOF_FAIL(Format, "%s: unexpected text after the end of the JSON document (%s; %s)",
                     source.c_str(), what.c_str(), kHint);
        if (e.byte >= text.size())
            SOF_FAIL(Format, "%s: unexpected end of file (%s; %s)", source.c_str(), what.c_str(),
                     kHint);
        SOF_FAIL(Format, "%s: %s (%s)", source.c_str(), what.c_str(), kHint);
    }
    if (!duplicate.empty())
        SOF_FAIL(Format, "%s: duplicate key \"%s\" (%s)", source.c_str(), duplicate.c_str(), kHint);
    return root;
}

const Json& json_get(const Json& obj, const char* key, const std::string& source) {
    if (!obj.is_object())
        SOF_FAIL(Format, "%s: expected an object holding \"%s\", found %s", source.c_str(), key,
                 type_name(obj));
    auto it = obj.find(key);
    if (it == obj.end())
        SOF_FAIL(Format,
                 "%s: missing key \"%s\" (the manifest is incomplete or from another program; "
                 "resume from another checkpoint)",
                 source.c_str(), key);
    return *it;
}

int64_t json_int(const Json& obj, const std::string& key, const std::string& source) {
    const Json& v = json_get(obj, key.c_str(), source);
    if (v.is_number_unsigned()) {
        uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(INT64_MAX))
            SOF_FAIL(Format, "%s: \"%s\" = %llu is out of range (%s)", source.c_str(), key.c_str(),
                     static_cast<unsigned long long>(u), kHint);
        return static_cast<int64_t>(u);
    }
    if (!v.is_number_integer())
        SOF_FAIL(Format, "%s: \"%s\" must be an integer, found %s", source.c_str(), key.c_str(),
                 type_name(v));
    return v.get<int64_t>();
}

std::string json_str(const Json& obj, const std::string& key, const std::string& source) {
    const Json& v = json_get(obj, key.c_str(), source);
    if (!v.is_string())
        SOF_FAIL(Format, "%s: \"%s\" must be a string, found %s", source.c_str(), key.c_str(),
                 type_name(v));
    return v.get<std::string>();
}

const Json& json_arr(const Json& obj, const char* key, const std::string& source) {
    const Json& v = json_get(obj, key, source);
    if (!v.is_array())
        SOF_FAIL(Format, "%s: \"%s\" must be an array, found %s", source.c_str(), key,
                 type_name(v));
    return v;
}

std::string json_quote(const std::string& s) {
    return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

} // namespace sof::ckpt
