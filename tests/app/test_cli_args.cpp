// The deck-driven commands' command line (app/cli.cpp over CLI11): DECK, --set key=value in
// order, a command's own --name VALUE options, -v; every mistake a Usage error with the usage line.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bench_adam_args.h"
#include "cli.h"
#include "core/error.h"

using namespace sof;
using namespace sof::app;

namespace {

bool contains(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("command line: DECK [--set key=value ...]") {
    auto parse = [](std::vector<std::string> args, std::vector<std::string> opts = {}) {
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        return parse_deck_args(static_cast<int>(argv.size()), argv.data(), "train", opts, true);
    };
    DeckArgs a = parse(
        {"d.yaml", "--set", "train.lr=0.1", "--set=train.steps=5", "--set", "runtime.trace=a=b"});
    CHECK(a.deck == "d.yaml");
    CHECK(a.overrides ==
          std::vector<std::string>{"train.lr=0.1", "train.steps=5", "runtime.trace=a=b"});
    DeckArgs b = parse({"--hardware", "gh200.yaml", "d.yaml", "--hardware=x.yaml"}, {"hardware"});
    CHECK(b.options.at("hardware") == "x.yaml");
    CHECK(b.deck == "d.yaml");

    auto usage_error = [&](std::vector<std::string> args, const std::string& needle) {
        try {
            parse(args);
        } catch (const core::Error& e) {
            CHECK(e.kind() == core::ErrorKind::Usage);
            CHECK_MESSAGE(contains(e.what(), needle), e.what());
            CHECK(contains(e.what(), "usage: superoffload train DECK"));
            return;
        }
        FAIL("expected a usage error");
    };
    usage_error({}, "no deck");
    usage_error({"a.yaml", "b.yaml"}, "one deck only");
    usage_error({"a.yaml", "--set"}, "--set needs key=value");
    usage_error({"a.yaml", "--set", "train.lr"}, "expects key=value");
    usage_error({"a.yaml", "--bogus"}, "unknown option '--bogus'");
    usage_error({"a.yaml", "--hardware", "x"}, "unknown option '--hardware'");
    CHECK(parse({"a.yaml", "-v"}).verbose);
    CHECK(parse({"--verbose", "a.yaml"}).verbose);
}

TEST_CASE("command line: the same arguments give the same result and messages as before CLI11") {
    auto parse = [](std::vector<std::string> args) {
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        return parse_deck_args(static_cast<int>(argv.size()), argv.data(), "plan",
                               {"hardware", "ranks"});
    };
    // later occurrences win; an option's value may look like an option or a negative number
    DeckArgs a = parse({"d.yaml", "--ranks", "2", "--ranks=4", "--set", "train.lr=-1"});
    CHECK(a.options.at("ranks") == "4");
    CHECK(a.options.count("hardware") == 0);
    CHECK(a.overrides == std::vector<std::string>{"train.lr=-1"});
    CHECK(parse({"d.yaml", "--ranks", "-1"}).options.at("ranks") == "-1");
    CHECK_FALSE(parse({"d.yaml"}).verbose);
    auto message = [&](std::vector<std::string> args) -> std::string {
        try {
            parse(args);
        } catch (const core::Error& e) {
            CHECK(e.kind() == core::ErrorKind::Usage);
            return e.what();
        }
        return "";
    };
    const std::string usage =
        "\nusage: superoffload plan DECK [--set key=value ...] [--hardware VALUE] [--ranks VALUE]";
    CHECK(message({"d.yaml", "--hardware"}) == "--hardware needs a value after it" + usage);
    CHECK(message({"d.yaml", "--set"}) == "--set needs key=value after it" + usage);
    CHECK(message({"d.yaml", "-v"}) == "superoffload plan: unknown option '-v'" + usage);
    CHECK(message({"d.yaml", "--"}) == "superoffload plan: unknown option '--'" + usage);
    CHECK(message({"-h"}) == "superoffload plan: arguments are one YAML deck and --set overrides "
                             "(every key: docs/deck.md)" +
                                 usage);
    CHECK(message({"--set=x"}) ==
          "--set expects key=value (e.g. --set train.lr=3e-4), got 'x'" + usage);
}

TEST_CASE("bench adam arguments: counts with K/M/G, positive integers, errors name the flag") {
    auto parse = [](std::vector<std::string> args) {
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        return parse_bench_adam_args(static_cast<int>(argv.size()), argv.data());
    };
    bench::BenchAdamOptions o = parse({"adam", "--params", "64K", "--pairs", "5", "--reps", "2",
                                       "--bf16-copy", "off", "--json", "--threads=3"});
    CHECK(o.params == 65536);
    CHECK(o.pairs == 5);
    CHECK(o.reps == 2);
    CHECK(o.threads == 3);
    CHECK_FALSE(o.lowp_copy);
    CHECK(o.json);
    CHECK(parse({"adam", "--params", "2.5e5", "--params", "1M"}).params == 1 << 20); // last wins
    const std::string usage = "\nusage: superoffload bench adam [--params N (default 32M)]";
    auto message = [&](std::vector<std::string> args) -> std::string {
        try {
            parse(args);
        } catch (const core::Error& e) {
            CHECK(e.kind() == core::ErrorKind::Usage);
            CHECK_MESSAGE(contains(e.what(), usage), e.what());
            return e.what();
        }
        FAIL("expected a usage error");
        return "";
    };
    CHECK(contains(message({"adam", "--params", "64K", "--pairs", "0"}),
                   "bench adam: --pairs '0' must be an integer >= 1 (K, M, G suffixes allowed)"));
    CHECK(contains(message({"adam", "--params", "1.5"}), "--params '1.5' must be an integer"));
    CHECK(contains(message({"adam", "--params", "64K", "--bogus"}),
                   "bench adam: unknown argument '--bogus'"));
    CHECK(contains(message({"adam", "--params", "64K", "extra"}),
                   "bench adam: unknown argument 'extra'"));
    CHECK(contains(message({"adam", "--params"}), "bench adam: --params needs a value"));
    CHECK(parse({"adam"}).params == bench::kBenchAdamDefaultParams); // memory-bound default
    CHECK(contains(message({"adam", "--params", "8", "--bf16-copy", "maybe"}),
                   "--bf16-copy 'maybe' must be on or off"));
}
