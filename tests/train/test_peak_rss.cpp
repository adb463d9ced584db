// Peak resident memory of a real training run on the host device against the planner's host
// figure (issue 20): the memory plan is what the engine allocates, so the run's peak RSS must be
// the plan's host total within 5% plus a fixed allowance for what the plan does not model.
#include "train/mpi_main.h"

#include <malloc.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "comm/world.h"
#include "config/deck.h"
#include "model/model_config.h"
#include "plan/planner.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace sof;

namespace {

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 when unreadable.
double status_bytes(const std::string& key) {
    std::ifstream f("/proc/self/status");
    std::string k;
    double kb = 0;
    std::string unit;
    while (f >> k) {
        if (k == key + ":") {
            f >> kb >> unit;
            return kb * 1024.0;
        }
        std::getline(f, unit);
    }
    return -1;
}

// Resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0: clear_refs 5).
bool reset_peak() {
    std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = std::fputs("5", f) >= 0;
    return std::fclose(f) == 0 && ok;
}

// What the plan does not model, for a run of this size: the data loaders (the built-in corpus,
// 2M training tokens), the model's scratch beyond its saved activations, thread stacks, the step
// log and metrics, allocator slack.
constexpr double kAllowance = 48.0 * 1048576.0;

// One configuration per process (ctest runs the binary once per weights mode): a second run in
// the same process lands on the first one's allocator state and reads ~50 MiB high.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true; // shadow memory and quarantines: RSS says nothing about plans
#else
constexpr bool kSanitized = false;
#endif

void check_peak(const std::string& w) {
    if (kSanitized) {
        MESSAGE("sanitizer build: peak RSS not compared with the plan");
        return;
    }
    const std::string dir = std::string(SOF_BINARY_DIR) + "/test-scratch/peak_rss_" + w;
    fs::remove_all(dir);
    {
        // ~6.4M params: the engine's buffers (~40 B/param with the host device's arena) dominate
        config::Config cfg = config::load_deck(
            std::string(SOF_SOURCE_DIR) + "/inputs/tiny.yaml",
            {"runtime.out_dir=" + dir + "/" + w,
             "train.checkpoint_dir=", "train.checkpoint_every=0", "train.steps=3",
             "train.eval_batches=1", "train.eval_every=0", "train.log_every=0",
             "model.num_layers=8", "model.channels=256", "offload.weights=" + w,
             "offload.bucket_mb=1", "runtime.log_level=quiet", "runtime.threads=1"});
        plan::Plan p = plan::make_plan(cfg, model::config_for(cfg.model), plan::hardware_for(cfg));
        REQUIRE(p.fits);
        comm::World world(MPI_COMM_WORLD);
        core::Log log(0, core::LogLevel::Quiet);
        malloc_trim(0); // what the previous run freed goes back to the system first
        const double base = status_bytes("VmRSS");
        REQUIRE(base > 0);
        train::Trainer t(cfg, world, log);
        // the start-up buffers (the init params and a zero buffer for the moments) are freed;
        // measure the run from here
        if (!reset_peak()) {
            MESSAGE("/proc/self/clear_refs not writable: peak RSS not measured");
            return;
        }
        train::RunSummary s = t.run();
        CHECK(s.end_step == 3);
        const double peak = status_bytes("VmHWM") - base;
        MESSAGE(w << ": peak RSS over the start " << peak / 1048576.0 << " MiB, plan host figure "
                  << p.mem.host_total / 1048576.0 << " MiB (" << p.num_params / 1e6 << "M params)");
        CHECK(peak <= 1.05 * p.mem.host_total + kAllowance);
        CHECK(peak >= 0.95 * p.mem.host_total - kAllowance);
    }
}

} // namespace

TEST_CASE("peak RSS of a stationary run == the plan's host figure (5% + 48 MiB)") {
    check_peak("stationary");
}

TEST_CASE("peak RSS of a weight-flow run == the plan's host figure (5% + 48 MiB)") {
    check_peak("flow");
}
