// `superoffload topo [--xml FILE] [--ranks N | --local-rank N --local-size N] [--bind]`: print the
// machine (NUMA nodes, cores, GPUs) and the placement of local ranks; --bind applies one.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli.h"
#include "commands.h"
#include "core/error.h"
#include "topo/topo.h"

namespace sof::app {

namespace {

const char* kTopoUsage =
    "usage: superoffload topo [--xml FILE] [--ranks N] [--local-rank N] [--local-size N] [--bind]\n"
    "  --xml FILE       read the machine from a hwloc XML file (lstopo --of xml) instead of this "
    "one\n"
    "  --ranks N        show the placement of every one of N ranks on this node (local ranks "
    "0..N-1)\n"
    "  --local-rank N   the rank's index on its node (default: launcher environment, else 0)\n"
    "  --local-size N   ranks on the node (default: launcher environment, else #GPUs or 1)\n"
    "  --bind           bind this process to the placement and report the binding";

int parse_count(const CliParser& p, const std::string& flag, const std::string& v, int min) {
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || x < min || x > 1 << 20)
        p.fail(core::strfmt("topo: %s expects %s integer, got '%s'", flag.c_str(),
                            min > 0 ? "a positive" : "a non-negative", v.c_str()));
    return static_cast<int>(x);
}

} // namespace

int cmd_topo(int argc, char** argv) {
    CliParser p({kTopoUsage, "topo: unknown argument '%s'",
                 [](const std::string& opt) { return "topo: " + opt + " needs a value"; }});
    std::string xml, rank_s, size_s, ranks_s;
    bool do_bind = false, help = false;
    p.option("--xml", &xml);
    p.option("--local-rank", &rank_s);
    p.option("--local-size", &size_s);
    p.option("--ranks", &ranks_s);
    p.flag("--bind", &do_bind);
    p.flag("-h,--help", &help);
    const std::vector<std::string> extra = p.parse(argc, argv);
    if (help) {
        std::printf("%s\n", kTopoUsage);
        return 0;
    }
    if (!extra.empty()) p.fail("topo: unknown argument '" + extra[0] + "'");
    int local_rank = p.count("--local-rank") ? parse_count(p, "--local-rank", rank_s, 0) : -1;
    int local_size = p.count("--local-size") ? parse_count(p, "--local-size", size_s, 1) : -1;
    const int ranks = p.count("--ranks") ? parse_count(p, "--ranks", ranks_s, 1) : 0;
    if (ranks > 0 && (local_rank >= 0 || local_size >= 0 || do_bind))
        p.fail("topo: --ranks shows every rank's placement; it goes without --local-rank, "
               "--local-size and --bind");

    topo::Machine m = topo::discover(xml);
    std::printf("%s", m.describe().c_str());
    if (ranks > 0) {
        for (int r = 0; r < ranks; r++)
            std::printf("placement: %s\n", topo::plan_placement(xml, r, ranks).describe().c_str());
        std::printf("(dry run: each rank binds itself to its placement at run time)\n");
        std::fflush(stdout);
        return 0;
    }
    if (local_rank < 0) local_rank = topo::local_rank_from_env(0);
    if (local_size < 0) {
        int guess = m.gpus.empty() ? 1 : static_cast<int>(m.gpus.size());
        local_size = topo::local_size_from_env(std::max(guess, local_rank + 1));
    }
    topo::Placement pl = topo::plan_placement(xml, local_rank, local_size);
    std::printf("placement: %s\n", pl.describe().c_str());
    if (do_bind) {
        topo::bind(pl);
        std::printf("bound: this process now runs on PUs %s with memory on NUMA node %d\n",
                    topo::current_binding().c_str(), pl.numa_node);
    } else {
        std::printf("(dry run: pass --bind to apply it; running on PUs %s now)\n",
                    topo::current_binding().c_str());
    }
    std::fflush(stdout);
    return 0;
}

} // namespace sof::app
