// `superoffload topo [--xml FILE] [--local-rank N] [--local-size N] [--bind]`: print the machine
// (NUMA nodes, cores, GPUs) and the placement of a local rank; --bind applies it and shows it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "topo/topo.h"

namespace sof::app {

namespace {

const char* kTopoUsage =
    "usage: superoffload topo [--xml FILE] [--local-rank N] [--local-size N] [--bind]\n"
    "  --xml FILE       read the machine from a hwloc XML file (lstopo --of xml) instead of this "
    "one\n"
    "  --local-rank N   the rank's index on its node (default: launcher environment, else 0)\n"
    "  --local-size N   ranks on the node (default: launcher environment, else #GPUs or 1)\n"
    "  --bind           bind this process to the placement and report the binding";

int parse_count(const std::string& flag, const char* v) {
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (!*v || *end || x < 0 || x > 1 << 20)
        SOF_FAIL(Usage, "topo: %s expects a non-negative integer, got '%s'\n%s", flag.c_str(), v,
                 kTopoUsage);
    return static_cast<int>(x);
}

} // namespace

int cmd_topo(int argc, char** argv) {
    std::string xml;
    int local_rank = -1, local_size = -1;
    bool do_bind = false;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const std::string& flag) -> const char* {
            if (i + 1 >= argc)
                SOF_FAIL(Usage, "topo: %s needs a value\n%s", flag.c_str(), kTopoUsage);
            return argv[++i];
        };
        if (a == "--xml")
            xml = value(a);
        else if (a == "--local-rank")
            local_rank = parse_count(a, value(a));
        else if (a == "--local-size")
            local_size = parse_count(a, value(a));
        else if (a == "--bind")
            do_bind = true;
        else if (a == "-h" || a == "--help") {
            std::printf("%s\n", kTopoUsage);
            return 0;
        } else
            SOF_FAIL(Usage, "topo: unknown argument '%s'\n%s", a.c_str(), kTopoUsage);
    }
    topo::Machine m = topo::discover(xml);
    if (local_rank < 0) local_rank = topo::local_rank_from_env(0);
    if (local_size < 0) {
        int guess = m.gpus.empty() ? 1 : static_cast<int>(m.gpus.size());
        local_size = topo::local_size_from_env(std::max(guess, local_rank + 1));
    }
    topo::Placement p = topo::plan_placement(xml, local_rank, local_size);
    std::printf("%s", m.describe().c_str());
    std::printf("placement: %s\n", p.describe().c_str());
    if (do_bind) {
        topo::bind(p);
        std::printf("bound: this process now runs on PUs %s with memory on NUMA node %d\n",
                    topo::current_binding().c_str(), p.numa_node);
    } else {
        std::printf("(dry run: pass --bind to apply it; running on PUs %s now)\n",
                    topo::current_binding().c_str());
    }
    std::fflush(stdout);
    return 0;
}

} // namespace sof::app
