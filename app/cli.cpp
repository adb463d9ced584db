// CLI11 behind the program's command-line conventions (see cli.h): Usage errors with the
// command's wording; the deck-driven commands' "DECK [--set key=value ...]" parser.
#include "cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "core/error.h"

namespace sof::app {

CliParser::CliParser(CliWording w) : w_(std::move(w)), app_(std::make_unique<CLI::App>()) {
    app_->set_help_flag(); // -h/--help are declared by each command (most print their usage)
    app_->allow_extras();  // unknown options are reported below, in our wording
    app_->add_option("positional", positional_);
}

CliParser::~CliParser() = default;

void CliParser::option(const std::string& name, std::string* dst) {
    app_->add_option(name, *dst)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void CliParser::option_list(const std::string& name, std::vector<std::string>* dst) {
    app_->add_option(name, *dst)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
}

void CliParser::flag(const std::string& names, bool* dst) {
    app_->add_flag(names, *dst);
}

size_t CliParser::count(const std::string& name) const {
    return app_->count(name);
}

void CliParser::fail(const std::string& what) const {
    core::throw_error(core::ErrorKind::Usage, what + "\n" + w_.usage);
}

std::vector<std::string> CliParser::parse(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    std::reverse(args.begin(), args.end()); // CLI11 takes the arguments last first
    try {
        app_->parse(args);
    } catch (const CLI::ArgumentMismatch& e) {
        // "--set: 1 required TEXT missing": the option is what precedes the colon
        const std::string m = e.what();
        fail(w_.missing_value(m.substr(0, m.find(':'))));
    } catch (const CLI::ParseError& e) {
        fail(e.what());
    }
    for (const std::string& r : app_->remaining())
        if (r.size() > 1 && r[0] == '-') fail(core::strfmt(w_.unknown_option.c_str(), r.c_str()));
    return positional_;
}

namespace {

std::string usage_line(const char* command, const std::vector<std::string>& value_options,
                       bool allow_verbose) {
    std::string s = core::strfmt("usage: superoffload %s DECK [--set key=value ...]", command);
    for (const std::string& o : value_options)
        s += " [--" + o + " VALUE]";
    if (allow_verbose) s += " [-v]";
    return s;
}

} // namespace

DeckArgs parse_deck_args(int argc, char** argv, const char* command,
                         const std::vector<std::string>& value_options, bool allow_verbose) {
    DeckArgs out;
    CliParser p({usage_line(command, value_options, allow_verbose),
                 core::strfmt("superoffload %s: unknown option '%%s'", command),
                 [](const std::string& opt) {
                     return opt == "--set" ? std::string("--set needs key=value after it")
                                           : opt + " needs a value after it";
                 }});
    std::vector<std::string> sets;
    p.option_list("--set", &sets);
    for (const std::string& name : value_options)
        p.option("--" + name, &out.options[name]);
    if (allow_verbose) p.flag("-v,--verbose", &out.verbose);
    bool help = false;
    p.flag("-h,--help", &help);
    const std::vector<std::string> decks = p.parse(argc, argv);
    if (help)
        p.fail(core::strfmt("superoffload %s: arguments are one YAML deck and --set overrides "
                            "(every key: docs/deck.md)",
                            command));
    for (const std::string& kv : sets) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            p.fail("--set expects key=value (e.g. --set train.lr=3e-4), got '" + kv + "'");
        out.overrides.push_back(kv);
    }
    for (auto it = out.options.begin(); it != out.options.end();) // options not given
        it = p.count("--" + it->first) ? std::next(it) : out.options.erase(it);
    if (decks.size() > 1)
        p.fail(core::strfmt("superoffload %s: one deck only, got '%s' and '%s'", command,
                            decks[0].c_str(), decks[1].c_str()));
    if (decks.empty()) p.fail(core::strfmt("superoffload %s: no deck given", command));
    out.deck = decks[0];
    return out;
}

} // namespace sof::app
