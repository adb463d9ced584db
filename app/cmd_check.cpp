// `superoffload check DECK [--set key=value ...]`: validate a deck (with its overrides) and print
// the effective deck, every key with its value, then "deck OK: <path>". Errors go up as
// core::Error.
#include <mpi.h>

#include <cstdio>

#include "cli.h"
#include "commands.h"
#include "ckpt/model_source.h"
#include "deck_checks.h"
#include "config/deck.h"
#include "model/model_config.h"

namespace sof::app {

int cmd_check(int argc, char** argv) {
    DeckArgs args = parse_deck_args(argc, argv, "check");
    config::Config cfg = config::load_deck(args.deck, args.overrides);
    model::validate_deck(cfg);
    // model.init_from: the architecture of its config.json (or llm.c header), as `train` reads it,
    // checked against the run (heads over parallel.sp, train.seq_len) and echoed in the deck
    std::string source;
    const model::ArchConfig mcfg = ckpt::resolve_model(&cfg, &source);
    ckpt::check_run_shape(cfg, mcfg);
    check_deck_against_install(cfg); // the plugin and device the run would use, as train does
    int rank = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        if (!source.empty()) std::printf("# model: %s\n", source.c_str());
        std::printf("# effective deck (every key; defaults included)\n%s",
                    config::effective_yaml(cfg).c_str());
        for (const std::string& w : config::deck_warnings(cfg))
            std::printf("warning: %s\n", w.c_str());
        std::printf("deck OK: %s\n", args.deck.c_str());
        std::fflush(stdout);
    }
    return 0;
}

} // namespace sof::app
