// `superoffload train DECK [--set key=value ...]`: load and validate the deck, then train.
// Every rank parses the deck, so deck errors are reported once by rank 0 (fatal_all). A stop
// signal ends the run after a whole step with a checkpoint and exit code 75 (signals.h).
#include <mpi.h>

#include <csignal>
#include <cstdio>

#include "cli.h"
#include "commands.h"
#include "deck_checks.h"
#include "signals.h"
#include "comm/world.h"
#include "config/deck.h"
#include "core/log.h"
#include "model/model_config.h"
#include "train/trainer.h"

namespace sof::app {

int cmd_train(int argc, char** argv) {
    DeckArgs args = parse_deck_args(argc, argv, "train", {}, true);
    config::Config cfg = config::load_deck(args.deck, args.overrides);
    model::validate_deck(cfg);
    check_deck_against_install(cfg); // what check refuses, train refuses alike, with file:line
    if (args.verbose) cfg.runtime.log_level = core::LogLevel::Debug;
    comm::World world(MPI_COMM_WORLD);
    core::Log log(world.rank(), cfg.runtime.log_level);
    log.info("superoffload train %s (%d rank%s; MPI: %s)", args.deck.c_str(), world.size(),
             world.size() == 1 ? "" : "s", comm::mpi_library().c_str());
    install_stop_handlers(); // before the (possibly long) setup: a signal then stops after step 1
    train::Trainer trainer(cfg, world, log); // binds the rank (parallel.bind) in its context
    trainer.set_crash_hook([] { std::raise(SIGKILL); }); // debug.fail_hard: die like a crash
    trainer.set_stop_check(stop_signal_received);
    train::RunSummary sum = trainer.run();
    if (sum.stopped) return kExitStopped;
    if (sum.all_skipped) { // the same on every rank: rank 0 reports, every rank exits 1
        if (world.rank() == 0) {
            std::fprintf(stderr,
                         "superoffload: runtime error: every step of this run was skipped (the "
                         "loss or the gradients were not finite), so nothing was trained; check "
                         "the initial weights (model.init_from), lower train.lr or set "
                         "train.grad_clip, or look for a bad input\n");
            std::fflush(stderr);
        }
        return 1;
    }
    return 0;
}

} // namespace sof::app
