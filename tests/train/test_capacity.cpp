// Weight flow past device capacity (paper 4.2): inputs/flow-capacity.yaml, whose training state is
// >= 8x the emulated device, trains under `flow` and matches the stationary run with enough memory;
// a train.global_batch run allocates what the plan of its batch geometry says.
#include "train/mpi_main.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/world.h"
#include "config/batch.h"
#include "config/deck.h"
#include "core/error.h"
#include "model/model_config.h"
#include "plan/planner.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace sof;

namespace {

const std::string kDeck = std::string(SOF_SOURCE_DIR) + "/inputs/flow-capacity.yaml";

struct Run {
    std::vector<float> losses; // (steps)
    std::vector<float> params; // (num_params)
};

config::Config deck(const std::string& name, const std::vector<std::string>& extra) {
    std::string dir = std::string(SOF_BINARY_DIR) + "/test-scratch/capacity/" + name;
    fs::remove_all(dir);
    std::vector<std::string> ov = {"runtime.out_dir=" + dir,  "train.steps=6",
                                   "train.eval_batches=1",    "train.log_every=0",
                                   "runtime.log_level=quiet", "runtime.threads=1"};
    ov.insert(ov.end(), extra.begin(), extra.end());
    return config::load_deck(kDeck, ov);
}

Run run_training(const config::Config& cfg) {
    comm::World world(MPI_COMM_WORLD);
    core::Log log(0, core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    Run r;
    r.losses = t.run().train_losses;
    r.params = t.params();
    return r;
}

size_t count_diff(const std::vector<float>& a, const std::vector<float>& b) {
    size_t d = 0;
    for (size_t i = 0; i < a.size(); i++)
        if (std::memcmp(&a[i], &b[i], 4) != 0) d++;
    return d;
}

} // namespace

TEST_CASE("weight flow trains a model whose state is >= 8x the device, same as stationary") {
    config::Config small = deck("flow", {});
    REQUIRE(small.offload.weights == config::WeightsPolicy::Flow);
    const double capacity = small.device.memory_gb * 1073741824.0;
    Run flow = run_training(small);

    // fp32 master params + fp32 grads + exp_avg + exp_avg_sq + bf16 working weights
    const double state = static_cast<double>(flow.params.size()) * (4 + 4 + 4 + 4 + 2);
    MESSAGE("training state " << state / 1048576.0 << " MiB, device " << capacity / 1048576.0
                              << " MiB: " << state / capacity << "x");
    CHECK(state >= 8.0 * capacity);

    // Stationary needs every weight and grad on the device: it does not fit in the small device.
    config::Config st_small = deck("stationary-small", {"offload.weights=stationary"});
    CHECK_THROWS_WITH_AS(run_training(st_small), doctest::Contains("device memory exhausted"),
                         core::Error);

    // With enough device memory stationary runs, and flow matched it bitwise.
    Run ref =
        run_training(deck("stationary", {"offload.weights=stationary", "device.memory_gb=1"}));
    REQUIRE(ref.losses.size() == flow.losses.size());
    REQUIRE(ref.params.size() == flow.params.size());
    CHECK(count_diff(ref.losses, flow.losses) == 0);
    CHECK_MESSAGE(count_diff(ref.params, flow.params) == 0,
                  count_diff(ref.params, flow.params)
                      << " params differ between flow and stationary");
    CHECK(flow.losses.back() < flow.losses.front()); // it trains
}

TEST_CASE("train.global_batch: the engine allocates what the plan of the run's geometry says") {
    // tiny.yaml with weight flow and global_batch 64 on one rank runs batch_size 8 x grad_accum 8:
    // the model's grads accumulate in pinned host memory (no grad ring), so with bf16 the two
    // casts tie and the plan keeps fp32 grads. A plan made before the geometry (grad_accum 1)
    // chose the grad ring and cast host instead, and the engine allocated something else.
    const std::string dir = std::string(SOF_BINARY_DIR) + "/test-scratch/capacity/global_batch";
    fs::remove_all(dir);
    const config::Config cfg = config::load_deck(
        std::string(SOF_SOURCE_DIR) + "/inputs/tiny.yaml",
        {"runtime.out_dir=" + dir, "train.steps=1", "train.eval_batches=1", "train.eval_every=0",
         "train.log_every=0", "train.checkpoint_dir=", "train.checkpoint_every=0",
         "runtime.log_level=quiet", "runtime.threads=1", "train.dtype=bf16", "offload.weights=flow",
         "offload.cast=auto", "offload.flow_grads=auto", "train.global_batch=64"});
    comm::World world(MPI_COMM_WORLD);
    core::Log log(0, core::LogLevel::Quiet);
    train::RunSummary s;
    {
        train::Trainer t(cfg, world, log);
        s = t.run();
    }
    // the plan as `train` and `plan` make it: the batch geometry first
    config::Config pc = cfg;
    CHECK(config::apply_batch_geometry(pc, world.size()).find("batch_size 8 x grad_accum 8") !=
          std::string::npos);
    const plan::Plan p = plan::make_plan(pc, model::config_for(pc.model), plan::hardware_for(pc));
    CHECK(p.flow_grads == config::FlowGrads::Host);
    CHECK(p.cast == config::CastAt::Device);
    CHECK(static_cast<double>(s.device_peak) == p.mem.total);
    // the run planned that geometry too: its effective deck carries the plan's choices
    const config::Config eff = config::load_deck(dir + "/effective_deck.yaml", {});
    CHECK(eff.train.batch_size == 8);
    CHECK(eff.train.grad_accum == 8);
    CHECK(eff.offload.flow_grads == config::FlowGrads::Host);
    CHECK(eff.offload.cast == config::CastAt::Device);
}
