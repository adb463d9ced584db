// `superoffload bench adam` arguments over CLI11 (see bench_adam_args.h): the messages and exit
// code 2 of the hand-written parser this replaces.
#include "bench_adam_args.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "cli.h"
#include "core/error.h"
#include "core/strfmt.h"

namespace sof::app {

namespace {

const char* kUsage = "usage: superoffload bench adam [--params N (default 32M)] [--plugin NAME] "
                     "[--plugin-dir DIR] [--threads T] [--bf16-copy on|off] [--reps R] "
                     "[--pairs K] [--json]";

// An integer >= lo; accepts 268435456, 2.68e8 and 256M (binary K/M/G).
int64_t count_of(const CliParser& p, const std::string& flag, const std::string& s, int64_t lo) {
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end && end != s.c_str() && end[0] && !end[1]) {
        const char* units = "KMG";
        for (int u = 0; u < 3; u++)
            if (*end == units[u] || *end == units[u] + ('a' - 'A')) {
                d *= static_cast<double>(int64_t{1} << (10 * (u + 1)));
                end++;
                break;
            }
    }
    if (!end || end == s.c_str() || *end || d < static_cast<double>(lo) || d > 9e15 ||
        d != static_cast<double>(static_cast<int64_t>(d)))
        p.fail(core::strfmt("bench adam: %s '%s' must be an integer >= %lld (K, M, G suffixes "
                            "allowed)",
                            flag.c_str(), s.c_str(), static_cast<long long>(lo)));
    return static_cast<int64_t>(d);
}

} // namespace

bench::BenchAdamOptions parse_bench_adam_args(int argc, char** argv) {
    if (argc < 1 || std::strcmp(argv[0], "adam") != 0)
        SOF_FAIL(Usage, "bench: expected the benchmark name 'adam' first\n%s", kUsage);
    CliParser p({kUsage, "bench adam: unknown argument '%s'",
                 [](const std::string& opt) { return "bench adam: " + opt + " needs a value"; }});
    bench::BenchAdamOptions o;
    std::string params, threads, reps, pairs, copy;
    p.option("--params", &params);
    p.option("--plugin", &o.plugin);
    p.option("--plugin-dir", &o.plugin_dir);
    p.option("--threads", &threads);
    p.option("--reps", &reps);
    p.option("--pairs", &pairs);
    p.option("--bf16-copy", &copy);
    p.flag("--json", &o.json);
    const std::vector<std::string> extra = p.parse(argc - 1, argv + 1);
    if (!extra.empty()) p.fail("bench adam: unknown argument '" + extra[0] + "'");
    if (p.count("--params")) o.params = count_of(p, "--params", params, 1);
    if (p.count("--threads")) o.threads = static_cast<int>(count_of(p, "--threads", threads, 1));
    if (p.count("--reps")) o.reps = static_cast<int>(count_of(p, "--reps", reps, 1));
    if (p.count("--pairs")) o.pairs = static_cast<int>(count_of(p, "--pairs", pairs, 1));
    if (p.count("--bf16-copy")) {
        if (copy != "on" && copy != "off")
            p.fail("bench adam: --bf16-copy '" + copy + "' must be on or off");
        o.lowp_copy = copy == "on";
    }
    return o;
}

} // namespace sof::app
