// `superoffload plan DECK [--hardware FILE] [--ranks N] [--set key=value ...]`: run the offload
// planner on a deck and a hardware profile and print choices, memory per rank and step times.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli.h"
#include "commands.h"
#include "config/batch.h"
#include "config/deck.h"
#include "ckpt/model_source.h"
#include "core/error.h"
#include "plan/comm_model.h"
#include "model/model_config.h"
#include "plan/planner.h"

namespace sof::app {

int cmd_plan(int argc, char** argv) {
    DeckArgs args = parse_deck_args(argc, argv, "plan", {"hardware", "ranks"});
    // planning needs shapes and policies, not the data shards, checkpoints or output directories
    config::Config cfg = config::load_deck(args.deck, args.overrides, config::DeckChecks::NoFiles);
    model::validate_deck(cfg);
    // model.init_from: the architecture of its config.json (or llm.c header), as `train` reads it
    std::string source;
    const model::ArchConfig mcfg = ckpt::resolve_model(&cfg, &source);
    ckpt::check_run_shape(cfg, mcfg);
    auto it = args.options.find("hardware");
    plan::HardwareProfile hw =
        it != args.options.end() ? plan::load_hardware(it->second) : plan::hardware_for(cfg);
    int rank = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // ranks: --ranks N (default: this job's size); ZeRO-3 shards the state over all of them
    int world = 1;
    if (initialized) MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (auto rk = args.options.find("ranks"); rk != args.options.end()) {
        char* end = nullptr;
        long v = std::strtol(rk->second.c_str(), &end, 10);
        if (rk->second.empty() || *end != '\0' || v < 1 || v > 1000000)
            SOF_FAIL(Usage, "plan: --ranks '%s' must be a whole number >= 1 (MPI ranks of the job)",
                     rk->second.c_str());
        world = static_cast<int>(v);
    }
    // train.global_batch: the per-rank micro-batch and accumulation of a job of `world` ranks,
    // resolved before planning as `train` does (config/batch.h)
    const std::string batch_note = config::apply_batch_geometry(cfg, world);
    int shard_ranks = cfg.parallel.zero_stage == 3 ? world : 1;
    plan::Plan p = plan::make_plan(cfg, mcfg, hw, shard_ranks);
    if (rank == 0) {
        for (const std::string& w : config::deck_warnings(cfg))
            std::fprintf(stderr, "superoffload: warning: %s\n", w.c_str());
        std::fflush(stderr);
        if (!batch_note.empty()) std::printf("batch: %s\n", batch_note.c_str());
        std::printf("%s", plan::describe(p).c_str());
        if (!source.empty()) std::printf("model: %s\n", source.c_str());
        config::Config resolved = cfg;
        plan::resolve_auto(resolved, p);
        std::printf(
            "deck values: offload.weights=%s offload.gpu_tail_buckets=%d "
            "offload.interleave_k=%d offload.rollback=%s offload.cast=%s offload.flow_grads=%s "
            "optimizer.state_dtype=%s optimizer.master_dtype=%s\n",
            resolved.offload.weights == config::WeightsPolicy::Flow ? "flow" : "stationary",
            resolved.offload.gpu_tail_buckets, resolved.offload.interleave_k,
            resolved.offload.rollback == config::Rollback::Inverse ? "inverse" : "exact",
            resolved.offload.cast == config::CastAt::Host ? "host" : "device",
            resolved.offload.flow_grads == config::FlowGrads::Host ? "host" : "device",
            plan::state_dtype_name(resolved.optimizer.state_dtype),
            resolved.optimizer.master_dtype == config::MasterDtype::BF16 ? "bf16" : "fp32");
        const model::ParamLayout layout = model::make_layout(mcfg);
        plan::CommVolume cv = plan::comm_per_step(
            layout, world, cfg.parallel.sp, cfg.parallel.zero_stage, cfg.train.batch_size,
            cfg.train.seq_len, cfg.train.grad_accum, cfg.model.recompute,
            cfg.train.dtype == config::Precision::BF16 && !cfg.debug.fp32_gathers ? 2 : 4);
        std::printf(
            "%s", plan::describe_comm(cv, world, cfg.parallel.sp, cfg.parallel.zero_stage).c_str());
        std::fflush(stdout);
    }
    return 0;
}

} // namespace sof::app
