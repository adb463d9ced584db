// `superoffload plan DECK [--hardware FILE] [--set key=value ...]`: run the offload planner on a
// deck and a hardware profile and print its choices, reasons, memory and predicted step times.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "config/deck.h"
#include "plan/comm_model.h"
#include "plan/planner.h"

namespace sof::app {

int cmd_plan(int argc, char** argv) {
    config::DeckArgs args = config::parse_deck_args(argc, argv, "plan", {"hardware", "ranks"});
    config::Config cfg = config::load_deck(args.deck, args.overrides);
    auto it = args.options.find("hardware");
    plan::HardwareProfile hw =
        it != args.options.end() ? plan::load_hardware(it->second) : plan::hardware_for(cfg);
    plan::Plan p = plan::make_plan(cfg, plan::model_config_for(cfg.model), hw);
    int rank = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        std::printf("%s", plan::describe(p).c_str());
        if (!cfg.model.init_from.empty())
            std::printf("note: the model sizes come from the deck's model section, not from %s\n",
                        cfg.model.init_from.c_str());
        config::Config resolved = cfg;
        plan::resolve_auto(resolved, p);
        std::printf("deck values: offload.weights=%s offload.gpu_tail_buckets=%d "
                    "offload.interleave_k=%d\n",
                    resolved.offload.weights == config::WeightsPolicy::Flow ? "flow" : "stationary",
                    resolved.offload.gpu_tail_buckets, resolved.offload.interleave_k);
        // collectives per rank: --ranks N (default: this job's size)
        int world = 1;
        if (initialized) MPI_Comm_size(MPI_COMM_WORLD, &world);
        auto rk = args.options.find("ranks");
        if (rk != args.options.end()) world = std::max(1, std::atoi(rk->second.c_str()));
        const model::ParamLayout layout = model::make_layout(plan::model_config_for(cfg.model));
        plan::CommVolume cv = plan::comm_per_step(
            layout, world, cfg.parallel.sp, cfg.parallel.zero_stage, cfg.train.batch_size,
            cfg.train.seq_len, cfg.train.grad_accum, cfg.model.recompute);
        std::printf(
            "%s", plan::describe_comm(cv, world, cfg.parallel.sp, cfg.parallel.zero_stage).c_str());
        std::fflush(stdout);
    }
    return 0;
}

} // namespace sof::app
