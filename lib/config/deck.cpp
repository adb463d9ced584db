// Deck loading: YAML text -> Config through the key table (fields.h), --set overrides, the
// unknown-key / duplicate / syntax messages with file:line, and the effective-deck writer.
#include "config/deck.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "config/fields.h"
#include "config/validate.h"
#include "core/error.h"
#include "core/input_file.h"

namespace sof::config {

namespace {

namespace fs = std::filesystem;

std::string leaf(const std::string& key) {
    size_t dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string parent(const std::string& key) {
    size_t dot = key.rfind('.');
    return dot == std::string::npos ? std::string() : key.substr(0, dot);
}

// A hint for the commonest YAML slip: tabs in the indentation of the failing line.
const char* syntax_hint(const std::string& text, int line) {
    std::stringstream ss(text);
    std::string l;
    for (int i = 0; i <= line && std::getline(ss, l); i++) {
    }
    size_t indent_end = l.find_first_not_of(" \t");
    if (l.substr(0, indent_end).find('\t') != std::string::npos)
        return " (indent with spaces: YAML does not allow tabs in indentation)";
    return "";
}

// One deck being loaded: the Config, its key table (pointers into it) and where keys were set.
class Loader {
  public:
    explicit Loader(std::string name, bool lenient = false, bool files = true)
        : name_(std::move(name)), lenient_(lenient), files_(files), fields_(bind_fields(cfg_)) {
        for (const Field& f : fields_) {
            keys_.push_back(f.key);
            for (std::string p = parent(f.key); !p.empty(); p = parent(p))
                sections_.insert(p);
        }
    }
    Loader(const Loader&) = delete;
    Loader& operator=(const Loader&) = delete;

    void load_yaml(const std::string& text) {
        // yaml-cpp reads a NUL byte as the end of a string and reports what follows as a bad
        // escape ("unknown escape character: 4"): name the byte and where it is instead
        if (const size_t nul = text.find('\0'); nul != std::string::npos) {
            const size_t line_start = text.rfind('\n', nul);
            const int line = 1 + static_cast<int>(std::count(
                                     text.begin(), text.begin() + static_cast<long>(nul), '\n'));
            const size_t col = nul - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
            fail(core::strfmt("%s:%d:%zu: the deck contains a NUL byte (0x00): a deck is YAML "
                              "text; is this a binary or corrupted file?",
                              name_.c_str(), line, col));
        }
        YAML::Node root;
        try {
            root = YAML::Load(text);
        } catch (const YAML::DeepRecursion& e) {
            fail(core::strfmt("%s:%d:%d: the deck is nested too deeply (yaml-cpp stops at %d "
                              "levels of nested lists or mappings); a deck has at most three "
                              "levels (section, subsection, key): is this the right file?",
                              name_.c_str(), e.mark.line + 1, e.mark.column + 1, e.depth()));
        } catch (const YAML::ParserException& e) {
            fail(core::strfmt("%s:%d:%d: YAML syntax error: %s%s", name_.c_str(), e.mark.line + 1,
                              e.mark.column + 1, e.msg.c_str(), syntax_hint(text, e.mark.line)));
        } catch (const YAML::Exception& e) {
            fail(name_ + ": YAML error: " + e.what());
        }
        if (root.IsNull()) return; // an empty deck: every key at its default
        if (!root.IsMap())
            fail(at(root) +
                 ": a deck is a mapping of sections (model:, data:, train:, ...), "
                 "not a " +
                 kind(root));
        walk(root, "");
    }

    void apply_override(const std::string& arg) {
        std::string where = "--set " + arg;
        size_t eq = arg.find('=');
        if (eq == std::string::npos || eq == 0)
            fail(where + ": expected key=value (e.g. --set train.lr=3e-4)");
        std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
        Origin origin{where, false};
        if (sections_.count(key))
            fail(where + ": '" + key + "' is a section, not a key; set one of its keys (" +
                 keys_of(key) + ")");
        const Field* f = find(key);
        if (!f) fail(where + ": " + unknown_key_message(key));
        if (std::holds_alternative<std::vector<int>*>(f->target)) {
            set_list(*f, split_list(value), origin);
        } else {
            set_scalar(*f, value, false, origin);
        }
        origins_[key] = origin;
    }

    Config finish() {
        if (!lenient_) validate(cfg_, origins_, name_, files_);
        cfg_.deck_path = name_;
        for (const auto& [key, o] : origins_)
            cfg_.origins[key] = o.where;
        return cfg_;
    }

  private:
    [[noreturn]] static void fail(const std::string& msg) {
        core::throw_error(core::ErrorKind::Config, msg);
    }

    std::string at(const YAML::Node& n) const {
        YAML::Mark m = n.Mark();
        return m.line >= 0 ? core::strfmt("%s:%d", name_.c_str(), m.line + 1) : name_;
    }

    static std::string kind(const YAML::Node& n) {
        switch (n.Type()) {
        case YAML::NodeType::Scalar:
            return "scalar '" + n.Scalar() + "'";
        case YAML::NodeType::Sequence:
            return "list";
        case YAML::NodeType::Map:
            return "mapping";
        default:
            return "null";
        }
    }

    const Field* find(const std::string& key) const {
        for (const Field& f : fields_)
            if (f.key == key) return &f;
        return nullptr;
    }

    // "batch_size, seq_len, ..." for the keys directly under a section.
    std::string keys_of(const std::string& section) const {
        std::string s;
        for (const std::string& k : keys_)
            if (k.compare(0, section.size() + 1, section + ".") == 0)
                s += (s.empty() ? "" : ", ") + k.substr(section.size() + 1);
        return s;
    }

    std::string unknown_key_message(const std::string& key) const {
        std::string msg = "unknown key '" + key + "'";
        std::vector<std::string> names = keys_;
        names.insert(names.end(), sections_.begin(), sections_.end());
        std::string near = nearest(key, names);
        if (near.empty()) { // the same name in another section ("train.weight_decay")
            for (const std::string& k : keys_)
                if (leaf(k) == leaf(key)) near = k;
        }
        if (!near.empty()) return msg + " (did you mean '" + near + "'?)";
        std::string sec = parent(key);
        if (sections_.count(sec)) return msg + " (keys of '" + sec + "': " + keys_of(sec) + ")";
        std::string tops;
        for (const std::string& s : sections_)
            if (s.find('.') == std::string::npos) tops += (tops.empty() ? "" : ", ") + s;
        return msg + " (sections: " + tops + "; every key is in docs/deck.md)";
    }

    void walk(const YAML::Node& map, const std::string& prefix) {
        for (auto it = map.begin(); it != map.end(); ++it) {
            YAML::Node k = it->first; // copies: it-> is a proxy that dies with the statement
            YAML::Node v = it->second;
            if (!k.IsScalar()) fail(at(k) + ": keys must be plain names, not a " + kind(k));
            std::string path = prefix.empty() ? k.Scalar() : prefix + "." + k.Scalar();
            std::string where = at(k);
            auto seen = seen_.find(path);
            if (seen != seen_.end())
                fail(where + ": duplicate key '" + path + "' (first set at " + seen->second + ")");
            seen_[path] = where;
            if (sections_.count(path)) {
                if (v.IsNull()) continue; // an empty section
                if (!v.IsMap())
                    fail(where + ": " + path + " is a section: expected a mapping of its keys (" +
                         keys_of(path) + "), got a " + kind(v));
                walk(v, path);
                continue;
            }
            const Field* f = find(path);
            if (!f && lenient_) continue;
            if (!f) fail(where + ": " + unknown_key_message(path));
            Origin origin{where, true};
            bool is_list = std::holds_alternative<std::vector<int>*>(f->target);
            if (v.IsSequence() && is_list) {
                std::vector<std::string> items;
                for (const YAML::Node& e : v) {
                    if (!e.IsScalar())
                        fail(where + ": " + path + ": expected a list of integers, got a " +
                             kind(e) + " in it");
                    items.push_back(e.Scalar());
                }
                set_list(*f, items, origin);
            } else if (v.IsScalar() || v.IsNull()) {
                set_scalar(*f, v.IsNull() ? std::string() : v.Scalar(), v.IsNull(), origin);
            } else {
                fail(where + ": " + path + ": expected " + describe_type(*f) + ", got a " +
                     kind(v));
            }
            origins_[path] = origin;
        }
    }

    // "[1, 2]", "1,2", "3" or "" -> the element texts.
    std::vector<std::string> split_list(std::string v) const {
        size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t");
        v = b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
        if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
        std::vector<std::string> items;
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ','))
            if (item.find_first_not_of(" \t") != std::string::npos) items.push_back(item);
        return items;
    }

    std::string name_;
    bool lenient_ = false; // parse_deck_text: unknown keys skipped, no validation
    bool files_ = true;    // validate the run's files too (DeckChecks::All)
    Config cfg_;
    std::vector<Field> fields_;
    std::vector<std::string> keys_;
    std::set<std::string> sections_;
    Origins origins_;
    std::map<std::string, std::string> seen_; // key -> "file:line" of its first occurrence
};

} // namespace

Config load_deck_from_string(const std::string& yaml, const std::string& name,
                             const std::vector<std::string>& overrides, DeckChecks checks) {
    Loader loader(name, false, checks == DeckChecks::All);
    loader.load_yaml(yaml);
    for (const std::string& o : overrides)
        loader.apply_override(o);
    return loader.finish();
}

Config parse_deck_text(const std::string& yaml, const std::string& name) {
    Loader loader(name, true);
    loader.load_yaml(yaml);
    return loader.finish();
}

std::string read_yaml_file(const std::string& path, const char* what) {
    uint64_t size = 0;
    std::string why;
    const int fd = core::open_regular(path, &size, &why); // never blocks (a FIFO is refused)
    if (fd < 0) {
        std::error_code ec;
        if (why == "no such file")
            SOF_FAIL(Io, "cannot read %s '%s': no such file (relative to %s)", what, path.c_str(),
                     fs::current_path(ec).c_str());
        if (why == "it is a directory")
            SOF_FAIL(Io, "cannot read %s '%s': it is a directory, not a YAML file", what,
                     path.c_str());
        if (why.find("not a regular file") != std::string::npos)
            SOF_FAIL(Io, "cannot read %s '%s': %s; give the path of a YAML file", what,
                     path.c_str(), why.c_str());
        SOF_FAIL(Io, "cannot read %s '%s': %s", what, path.c_str(), why.c_str());
    }
    if (size > static_cast<uint64_t>(kMaxDeckBytes)) {
        ::close(fd);
        SOF_FAIL(Io,
                 "cannot read %s '%s': it is %llu bytes, more than the %lld a YAML input may "
                 "have (is it the right file?)",
                 what, path.c_str(), static_cast<unsigned long long>(size), kMaxDeckBytes);
    }
    std::string text;
    char buf[65536];
    for (;;) { // bounded even if the file grows while we read it
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            ::close(fd);
            SOF_FAIL(Io, "cannot read %s '%s': %s", what, path.c_str(), std::strerror(e));
        }
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
        if (static_cast<long long>(text.size()) > kMaxDeckBytes) {
            ::close(fd);
            SOF_FAIL(Io, "cannot read %s '%s': more than %lld bytes (is it the right file?)", what,
                     path.c_str(), kMaxDeckBytes);
        }
    }
    ::close(fd);
    return text;
}

Config load_deck(const std::string& path, const std::vector<std::string>& overrides,
                 DeckChecks checks) {
    return load_deck_from_string(read_yaml_file(path, "deck"), path, overrides, checks);
}

std::string effective_yaml(const Config& cfg) {
    Config copy = cfg;
    std::vector<Field> fields = bind_fields(copy);
    std::string out;
    std::vector<std::string> open; // the sections currently open, outermost first
    for (const Field& f : fields) {
        std::vector<std::string> parts;
        std::stringstream ss(f.key);
        for (std::string p; std::getline(ss, p, '.');)
            parts.push_back(p);
        size_t common = 0;
        while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common])
            common++;
        open.resize(common);
        for (size_t i = common; i + 1 < parts.size(); i++) {
            out += std::string(2 * i, ' ') + parts[i] + ":\n";
            open.push_back(parts[i]);
        }
        out += std::string(2 * open.size(), ' ') + parts.back() + ": " + format_value(f) + "\n";
    }
    return out;
}

std::vector<std::string> all_keys() {
    Config c;
    std::vector<std::string> keys;
    for (const Field& f : bind_fields(c))
        keys.push_back(f.key);
    return keys;
}

} // namespace sof::config
