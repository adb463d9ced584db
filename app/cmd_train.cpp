// `superoffload train DECK [--set key=value ...]`: load and validate the deck, then train.
// Every rank parses the deck, so deck errors are reported once by rank 0 (fatal_all). A stop
// signal ends the run after a whole step with a checkpoint and exit code 75 (signals.h).
#include <mpi.h>

#include <csignal>

#include "commands.h"
#include "signals.h"
#include "comm/world.h"
#include "config/deck.h"
#include "core/log.h"
#include "train/trainer.h"

namespace sof::app {

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
    install_stop_handlers(); // before the (possibly long) setup: a signal then stops after step 1
    train::Trainer trainer(cfg, world, log); // binds the rank (parallel.bind) in its context
    trainer.set_crash_hook([] { std::raise(SIGKILL); }); // debug.fail_hard: die like a crash
    trainer.set_stop_check(stop_signal_received);
    train::RunSummary sum = trainer.run();
    return sum.stopped ? kExitStopped : 0;
}

} // namespace sof::app
