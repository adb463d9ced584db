// Recursive-descent JSON reader for manifests (depth-limited so corrupt input cannot overflow the
// stack) and the string quoting used when writing them.
#include "ckpt/json.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace sof::ckpt {

namespace {

constexpr int kMaxDepth = 32;

class Parser {
  public:
    Parser(const std::string& text, const std::string& source) : t_(text), src_(source) {}

    JsonValue parse_document() {
        JsonValue v = value(0);
        skip_ws();
        if (pos_ != t_.size()) fail("unexpected text after the end of the JSON document");
        return v;
    }

  private:
    const std::string& t_;
    const std::string& src_;
    size_t pos_ = 0;
    int line_ = 1;

    [[noreturn]] void fail(const char* what) {
        SOF_FAIL(Format,
                 "%s line %d: %s (the manifest is corrupt or was edited by hand; restore it or "
                 "resume from another checkpoint)",
                 src_.c_str(), line_, what);
    }

    void skip_ws() {
        while (pos_ < t_.size()) {
            char c = t_[pos_];
            if (c == '\n') line_++;
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
            pos_++;
        }
    }

    char peek() {
        skip_ws();
        if (pos_ >= t_.size()) fail("unexpected end of file");
        return t_[pos_];
    }

    void expect(char c) {
        if (peek() != c) {
            std::string msg = std::string("expected '") + c + "'";
            fail(msg.c_str());
        }
        pos_++;
    }

    bool literal(const char* word) {
        size_t n = std::char_traits<char>::length(word);
        if (t_.compare(pos_, n, word) == 0) {
            pos_ += n;
            return true;
        }
        return false;
    }

    JsonValue value(int depth) {
        if (depth > kMaxDepth) fail("nesting too deep");
        char c = peek();
        JsonValue v;
        v.line = line_;
        if (c == '{') {
            v.type = JsonValue::Type::Object;
            pos_++;
            if (peek() == '}') {
                pos_++;
                return v;
            }
            for (;;) {
                if (peek() != '"') fail("expected a quoted key");
                std::string key = string_body();
                expect(':');
                JsonValue child = value(depth + 1);
                if (v.obj.count(key)) fail("duplicate key");
                v.obj.emplace(std::move(key), std::move(child));
                char d = peek();
                pos_++;
                if (d == '}') break;
                if (d != ',') fail("expected ',' or '}'");
            }
        } else if (c == '[') {
            v.type = JsonValue::Type::Array;
            pos_++;
            if (peek() == ']') {
                pos_++;
                return v;
            }
            for (;;) {
                v.arr.push_back(value(depth + 1));
                char d = peek();
                pos_++;
                if (d == ']') break;
                if (d != ',') fail("expected ',' or ']'");
            }
        } else if (c == '"') {
            v.type = JsonValue::Type::String;
            v.s = string_body();
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            v.type = JsonValue::Type::Int;
            size_t start = pos_;
            if (t_[pos_] == '-') pos_++;
            while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9')
                pos_++;
            if (pos_ < t_.size() && (t_[pos_] == '.' || t_[pos_] == 'e' || t_[pos_] == 'E'))
                fail("expected an integer");
            std::string num = t_.substr(start, pos_ - start);
            if (num == "-") fail("expected a number");
            errno = 0;
            char* end = nullptr;
            long long x = std::strtoll(num.c_str(), &end, 10);
            if (errno == ERANGE) fail("integer out of range");
            v.i = x;
        } else if (literal("true")) {
            v.type = JsonValue::Type::Bool;
            v.b = true;
        } else if (literal("false")) {
            v.type = JsonValue::Type::Bool;
        } else if (literal("null")) {
            v.type = JsonValue::Type::Null;
        } else {
            fail("unexpected character");
        }
        return v;
    }

    // At an opening quote: returns the decoded string and moves past the closing quote.
    std::string string_body() {
        pos_++;
        std::string out;
        for (;;) {
            if (pos_ >= t_.size()) fail("unterminated string");
            char c = t_[pos_++];
            if (c == '"') return out;
            if (c == '\n') fail("newline inside a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= t_.size()) fail("unterminated string");
            char e = t_[pos_++];
            switch (e) {
            case '"':
            case '\\':
            case '/':
                out += e;
                break;
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'u': {
                if (pos_ + 4 > t_.size()) fail("bad \\u escape");
                unsigned cp = 0;
                for (int k = 0; k < 4; k++) {
                    char h = t_[pos_++];
                    cp <<= 4;
                    if (h >= '0' && h <= '9')
                        cp |= static_cast<unsigned>(h - '0');
                    else if (h >= 'a' && h <= 'f')
                        cp |= static_cast<unsigned>(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F')
                        cp |= static_cast<unsigned>(h - 'A' + 10);
                    else
                        fail("bad \\u escape");
                }
                // we only write \u00XX for control bytes; decode BMP code points as UTF-8
                if (cp < 0x80) {
                    out += static_cast<char>(cp);
                } else if (cp < 0x800) {
                    out += static_cast<char>(0xC0 | (cp >> 6));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                } else {
                    out += static_cast<char>(0xE0 | (cp >> 12));
                    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                }
                break;
            }
            default:
                fail("bad escape in string");
            }
        }
    }
};

const char* type_name(JsonValue::Type t) {
    switch (t) {
    case JsonValue::Type::Null:
        return "null";
    case JsonValue::Type::Bool:
        return "a boolean";
    case JsonValue::Type::Int:
        return "an integer";
    case JsonValue::Type::String:
        return "a string";
    case JsonValue::Type::Array:
        return "an array";
    case JsonValue::Type::Object:
        return "an object";
    }
    return "?";
}

const JsonValue& typed(const JsonValue& obj, const std::string& key, const std::string& source,
                       JsonValue::Type want) {
    const JsonValue& v = json_get(obj, key, source);
    if (v.type != want)
        SOF_FAIL(Format, "%s line %d: \"%s\" must be %s, found %s", source.c_str(), v.line,
                 key.c_str(), type_name(want), type_name(v.type));
    return v;
}

} // namespace

JsonValue json_parse(const std::string& text, const std::string& source) {
    Parser p(text, source);
    return p.parse_document();
}

const JsonValue& json_get(const JsonValue& obj, const std::string& key, const std::string& source) {
    if (obj.type != JsonValue::Type::Object)
        SOF_FAIL(Format, "%s line %d: expected an object holding \"%s\"", source.c_str(), obj.line,
                 key.c_str());
    auto it = obj.obj.find(key);
    if (it == obj.obj.end())
        SOF_FAIL(Format,
                 "%s: missing key \"%s\" (the manifest is incomplete or from another program; "
                 "resume from another checkpoint)",
                 source.c_str(), key.c_str());
    return it->second;
}

int64_t json_int(const JsonValue& obj, const std::string& key, const std::string& source) {
    return typed(obj, key, source, JsonValue::Type::Int).i;
}

std::string json_str(const JsonValue& obj, const std::string& key, const std::string& source) {
    return typed(obj, key, source, JsonValue::Type::String).s;
}

const JsonValue& json_arr(const JsonValue& obj, const std::string& key, const std::string& source) {
    return typed(obj, key, source, JsonValue::Type::Array);
}

std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (u < 0x20) {
            out += core::strfmt("\\u%04x", u);
        } else {
            out += c;
        }
    }
    out += '"';
    return out;
}

} // namespace sof::ckpt
