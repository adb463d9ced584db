// Peak resident memory of a real training run on the host device against the planner's host
// figure (issue 20): the memory plan is what the engine allocates, so the run's peak RSS must be
// the plan's host total within 1% plus a fixed allowance for what the plan does not model;
// stationary and weight flow in fp32 with exact rollback, and the lean host side (bf16 grads and
// moments, inverse rollback, the grad ring).
#include "train/mpi_main.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/world.h"
#include "config/deck.h"
#include "model/model_config.h"
#include "offload/memory_plan.h"
#include "plan/planner.h"
#include "train/trainer.h"
#include "zero/memory.h"

namespace fs = std::filesystem;
using namespace sof;

namespace {

constexpr double kMiB = 1048576.0;

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

// What the plan does not model, measured: a run of a 70K-parameter model (the "probe" case below:
// 1 layer x 64 channels, whose engine buffers are tiny) peaks 3.1-3.2 MiB above its plan, the
// runs below 3.9-4.1 MiB above theirs (2026-11-27, this 2-vCPU VM): the model's scratch beyond
// its saved activations, thread stacks and their malloc arenas, the optimizer plugin and OpenMP
// runtime's first use, the step log and metrics, the data loaders (the built-in corpus is cut to
// 64K tokens here: its default 2M uint16 tokens alone are 4 MiB). The allowance is about twice
// the probe's figure; kFraction covers what grows with the model (allocator rounding).
constexpr double kAllowance = 6.0 * kMiB;
constexpr double kFraction = 0.01;

// One configuration per process (ctest runs the binary once per case): a second run in the
// same process lands on the first one's allocator state and reads high.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true; // shadow memory and quarantines: RSS says nothing about plans
#else
constexpr bool kSanitized = false;
#endif

struct Measured {
    double peak = 0;     // peak RSS of the run over the RSS before it (bytes)
    double plan = 0;     // the plan's host figure (bytes)
    double smallest = 0; // the plan's smallest whole-model buffer (bytes)
    double params = 0;
};

// Trains 3 steps of inputs/tiny.yaml with `sets` on the host device and measures its peak RSS.
Measured measure(const std::string& name, const std::vector<std::string>& sets) {
    const std::string dir = std::string(SOF_BINARY_DIR) + "/test-scratch/peak_rss_" + name;
    fs::remove_all(dir);
    std::vector<std::string> ov = {
        "runtime.out_dir=" + dir, "train.checkpoint_dir=",          "train.checkpoint_every=0",
        "train.steps=3",          "train.eval_batches=1",           "train.eval_every=0",
        "train.log_every=0",      "runtime.log_level=quiet",        "runtime.threads=1",
        "offload.bucket_mb=1",    "data.builtin.train_tokens=65536"};
    ov.insert(ov.end(), sets.begin(), sets.end());
    config::Config cfg = config::load_deck(std::string(SOF_SOURCE_DIR) + "/inputs/tiny.yaml", ov);
    const model::ArchConfig arch = model::config_for(cfg.model);
    plan::Plan p = plan::make_plan(cfg, arch, plan::hardware_for(cfg));
    REQUIRE(p.fits);
    Measured m;
    m.plan = p.mem.host_total;
    m.params = p.num_params;
    // the engine's buffers with the plan's choices: the smallest whole-model one (2 or 4
    // B/param; unit slots and bucket-sized buffers are smaller than 2 B/param here)
    config::Config rc = cfg;
    plan::resolve_auto(rc, p);
    const model::ParamLayout layout = model::make_layout(arch);
    const offload::MemoryPlan mp =
        offload::make_memory_plan(zero::sharded_plan_inputs(rc, layout, 1, false));
    m.smallest = 1e300;
    for (const offload::BufferSpec& b : mp.buffers)
        if (b.bytes >= 2 * layout.num_params)
            m.smallest = std::min(m.smallest, static_cast<double>(b.bytes));
    comm::World world(MPI_COMM_WORLD);
    core::Log log(0, core::LogLevel::Quiet);
    malloc_trim(0); // what start-up freed goes back to the system first
    const double base = status_bytes("VmRSS");
    REQUIRE(base > 0);
    train::Trainer t(cfg, world, log);
    // the start-up buffers (the init params and a zero buffer for the moments) are freed;
    // measure the run from here
    if (!reset_peak()) return m;
    train::RunSummary s = t.run();
    CHECK(s.end_step == 3);
    m.peak = status_bytes("VmHWM") - base;
    MESSAGE(name << ": peak RSS over the start " << m.peak / kMiB << " MiB, plan host figure "
                 << m.plan / kMiB << " MiB (" << m.params / 1e6 << "M params), "
                 << (m.peak - m.plan) / kMiB << " MiB above the plan; smallest whole-model "
                 << "buffer " << m.smallest / kMiB << " MiB");
    return m;
}

void check_peak(const std::string& name, const std::vector<std::string>& sets) {
    if (kSanitized) {
        MESSAGE("sanitizer build: peak RSS not compared with the plan");
        return;
    }
    const Measured m = measure(name, sets);
    if (m.peak == 0) {
        MESSAGE("/proc/self/clear_refs not writable: peak RSS not measured");
        return;
    }
    const double tolerance = kFraction * m.plan + kAllowance;
    CHECK(m.peak <= m.plan + tolerance);
    CHECK(m.peak >= m.plan - tolerance);
    // the model is large enough that the comparison sees one buffer more or less: an unplanned
    // buffer of 1 B/param, or the plan's smallest whole-model buffer (2 B/param: bf16 grads or
    // moments; 4 in fp32) not allocated, would put the peak outside the tolerance
    CHECK(m.peak + m.params > m.plan + tolerance);
    CHECK(m.peak - m.smallest < m.plan - tolerance);
}

// 8.4M params (8 layers x 256 channels, a vocabulary of 8192): 1 B/param = 8.0 MiB, more than
// the tolerance; 4 sequences of 16 tokens per step keep each run at ~3 s.
const std::vector<std::string> kModel = {"model.num_layers=8", "model.channels=256",
                                         "model.vocab_size=8192", "train.batch_size=4",
                                         "train.seq_len=16"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

TEST_CASE("peak RSS of a stationary run == the plan's host figure") {
    check_peak("stationary", with(kModel, {"offload.weights=stationary"}));
}

TEST_CASE("peak RSS of a weight-flow run == the plan's host figure") {
    check_peak("flow", with(kModel, {"offload.weights=flow"}));
}

TEST_CASE("peak RSS of a lean run == the plan's host figure") {
    // the leanest host side on the host device: weight flow with the grad ring, bf16 grads
    // (cast host), inverse rollback (one state set), bf16 moments: 10 B/param of host state
    // and grads next to the host device's arena
    check_peak("lean", with(kModel, {"offload.weights=flow", "train.dtype=bf16",
                                     "offload.cast=host", "offload.rollback=inverse",
                                     "optimizer.state_dtype=bf16", "offload.flow_grads=device"}));
}

TEST_CASE("peak RSS of a q8 + bf16-master run == the plan's host figure") {
    // issue 28's formats: q8 moments (1 byte + a scale per 256) and a bf16 master with stochastic
    // rounding, exact rollback (two state sets of 4.03 B/param), weight flow with the grad ring
    check_peak("q8", with(kModel, {"offload.weights=flow", "train.dtype=bf16", "offload.cast=host",
                                   "offload.rollback=exact", "optimizer.state_dtype=q8",
                                   "optimizer.master_dtype=bf16", "offload.flow_grads=device"}));
}

TEST_CASE("probe: the fixed overhead of a run of a tiny model" * doctest::skip()) {
    // what kAllowance is based on: a 1-layer, 64-channel model whose buffers are tiny
    measure("probe",
            {"model.num_layers=1", "model.channels=64", "train.batch_size=4", "train.seq_len=16"});
}
