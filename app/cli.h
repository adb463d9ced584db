// Command-line parsing of the subcommands with CLI11: each command declares its options on a
// CliParser, which turns CLI11's errors into the program's Usage errors (exit code 2) with the
// command's own wording and usage text.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace sof::app {

// The usage text of one command and its wording of the two common errors.
struct CliWording {
    std::string usage;          // appended to every error, after a newline
    std::string unknown_option; // one %s, the option as given: "superoffload train: unknown ..."
    // the message for an option given without its value ("--set" -> "--set needs ...")
    std::function<std::string(const std::string&)> missing_value;
};

// CLI11 is included by cli.cpp alone: its header costs 12 s of compile time at -O2 (40 s under
// ASan+UBSan) in every file that includes it, and each command needs only these declarations.
class CliParser {
  public:
    explicit CliParser(CliWording w);
    ~CliParser();
    CliParser(const CliParser&) = delete;
    CliParser& operator=(const CliParser&) = delete;
    // "--name VALUE" (also "--name=VALUE"): one value, a later occurrence replaces an earlier one;
    // kept as text for the command to check with its own message.
    void option(const std::string& name, std::string* dst);
    // "--name VALUE" that may repeat: every value, in command-line order.
    void option_list(const std::string& name, std::vector<std::string>* dst);
    // A flag; names as CLI11 spells them ("-h,--help").
    void flag(const std::string& names, bool* dst);
    // How often the option or flag was given (after parse).
    size_t count(const std::string& name) const;
    // Parses the arguments after the subcommand's name. Unknown options and options without
    // their value are Usage errors in the command's wording; returns the positional arguments.
    std::vector<std::string> parse(int argc, char** argv);
    // A Usage error: `what`, a newline, the usage text.
    [[noreturn]] void fail(const std::string& what) const;

  private:
    CliWording w_;
    std::unique_ptr<CLI::App> app_;
    std::vector<std::string> positional_;
};

// The command line of a deck-driven subcommand: "DECK [--set key=value ...]".
struct DeckArgs {
    std::string deck;                           // path of the deck file
    std::vector<std::string> overrides;         // "key=value", in command-line order (later wins)
    std::map<std::string, std::string> options; // extra "--name VALUE" options a command allows
    bool verbose = false;                       // -v (commands that allow it)
};

// Parses "DECK [--set key=value ...]" (also "--set=key=value"), "--<name> VALUE" /
// "--<name>=VALUE" for each name in value_options (e.g. {"hardware"} for `plan`) and, with
// allow_verbose, "-v"/"--verbose". Throws a Usage error naming `command` for anything else (no
// deck, two decks, unknown option, --set without key=value, -h/--help).
DeckArgs parse_deck_args(int argc, char** argv, const char* command,
                         const std::vector<std::string>& value_options = {},
                         bool allow_verbose = false);

} // namespace sof::app
