// Command-line parsing for deck-driven subcommands: "DECK [--set key=value ...]" plus the
// "--name VALUE" options a command allows. Anything else is a Usage error naming the command.
#include <algorithm>
#include <cstring>

#include "config/deck.h"
#include "core/error.h"

namespace sof::config {

namespace {

std::string usage_line(const char* command, const std::vector<std::string>& value_options) {
    std::string s = core::strfmt("usage: superoffload %s DECK [--set key=value ...]", command);
    for (const std::string& o : value_options)
        s += " [--" + o + " VALUE]";
    return s;
}

} // namespace

DeckArgs parse_deck_args(int argc, char** argv, const char* command) {
    return parse_deck_args(argc, argv, command, {});
}

DeckArgs parse_deck_args(int argc, char** argv, const char* command,
                         const std::vector<std::string>& value_options) {
    DeckArgs out;
    const std::string usage = usage_line(command, value_options);
    auto fail = [&](const std::string& what) {
        core::throw_error(core::ErrorKind::Usage, what + "\n" + usage);
    };
    for (int i = 0; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--set") {
            if (i + 1 >= argc) fail("--set needs key=value after it");
            a = std::string("--set=") + argv[++i];
        }
        if (a.rfind("--set=", 0) == 0) {
            std::string kv = a.substr(6);
            size_t eq = kv.find('=');
            if (eq == std::string::npos || eq == 0)
                fail("--set expects key=value (e.g. --set train.lr=3e-4), got '" + kv + "'");
            out.overrides.push_back(kv);
            continue;
        }
        if (a == "-h" || a == "--help")
            fail(core::strfmt("superoffload %s: arguments are one YAML deck and --set overrides "
                              "(every key: docs/deck.md)",
                              command));
        if (a.rfind("--", 0) == 0) {
            std::string name = a.substr(2), value;
            size_t eq = name.find('=');
            bool inline_value = eq != std::string::npos;
            if (inline_value) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
            }
            if (std::find(value_options.begin(), value_options.end(), name) == value_options.end())
                fail(core::strfmt("superoffload %s: unknown option '%s'", command, a.c_str()));
            if (!inline_value) {
                if (i + 1 >= argc) fail("--" + name + " needs a value after it");
                value = argv[++i];
            }
            out.options[name] = value;
            continue;
        }
        if (a.size() > 1 && a[0] == '-')
            fail(core::strfmt("superoffload %s: unknown option '%s'", command, a.c_str()));
        if (!out.deck.empty())
            fail(core::strfmt("superoffload %s: one deck only, got '%s' and '%s'", command,
                              out.deck.c_str(), a.c_str()));
        out.deck = a;
    }
    if (out.deck.empty()) fail(core::strfmt("superoffload %s: no deck given", command));
    return out;
}

} // namespace sof::config
