// Weight flow past device capacity (paper 4.2): inputs/flow-capacity.yaml, whose training state is
// >= 8x the emulated device, trains under `flow` and matches the stationary run with enough memory.
#include "train/mpi_main.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/world.h"
#include "config/deck.h"
#include "core/error.h"
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
