// `superoffload train DECK [--set key=value ...]`: load and validate the deck, then train.
// Every rank parses the deck, so deck errors are reported once by rank 0 (fatal_all).
#include <mpi.h>

#include <cstring>
#include <vector>

#include "commands.h"
#include "comm/world.h"
#include "config/deck.h"
#include "core/log.h"
#include "topo/topo.h"
#include "train/trainer.h"

namespace sof::app {

// Binds this rank's threads and memory to the NUMA node nearest its GPU (one rank per Superchip).
// A failed bind (a container that forbids mbind, a cpuset smaller than the node) costs speed, not
// correctness: it is reported with the fix and the run goes on unbound.
static void bind_rank(const core::Log& log) {
    try {
        topo::Placement p =
            topo::plan_placement("", topo::local_rank_from_env(0), topo::local_size_from_env(1));
        topo::bind(p);
        log.info("bind: %s", p.describe().c_str());
        // first touch after binding must land on the rank's node (on GH200 not in the GPU's HBM);
        // 2 MiB is above malloc's mmap threshold, so these are fresh pages, not reused heap
        std::vector<char> probe(1 << 21);
        std::memset(probe.data(), 1, probe.size());
        int node = topo::memory_node_of(probe.data());
        if (node >= 0 && p.numa_node >= 0 && node != p.numa_node)
            log.warn("bind: new memory lands on NUMA node %d, not on node %d: check the launcher's "
                     "--mem-bind / numactl settings",
                     node, p.numa_node);
    } catch (const std::exception& e) {
        log.warn("bind: not bound (%s); set parallel.bind: false to skip binding, or launch "
                 "with srun --cpu-bind=none",
                 e.what());
    }
}

int cmd_train(int argc, char** argv) {
    config::DeckArgs args = config::parse_deck_args(argc, argv, "train");
    config::Config cfg = config::load_deck(args.deck, args.overrides);
    comm::World world(MPI_COMM_WORLD);
    core::LogLevel level = cfg.runtime.log_level == "quiet"   ? core::LogLevel::Quiet
                           : cfg.runtime.log_level == "debug" ? core::LogLevel::Debug
                                                              : core::LogLevel::Info;
    core::Log log(world.rank(), level);
    log.info("superoffload train %s (%d rank%s)", args.deck.c_str(), world.size(),
             world.size() == 1 ? "" : "s");
    if (cfg.parallel.bind) bind_rank(log);
    train::Trainer trainer(cfg, world, log);
    trainer.run();
    return 0;
}

} // namespace sof::app
