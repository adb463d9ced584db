// Pieces of a run that survives (run with 2 ranks): the stop decision agreed by all ranks, stops of
// a whole training run at every point of its loop, the metrics writer, the advisory directory lock.
#include "train/mpi_main.h"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "comm/world.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/lockfile.h"
#include "train/metrics.h"
#include "train/stop.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace sof;

namespace {

std::string scratch(const std::string& name, int rank) {
    std::string d =
        std::string(SOF_BINARY_DIR) + "/test-scratch/train/" + name + "_r" + std::to_string(rank);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

const char* kDeck = R"(model:
  num_layers: 2
  num_heads: 2
  channels: 32
  max_seq_len: 16
  vocab_size: 64
data:
  train: builtin
  val: builtin
  builtin:
    train_tokens: 8192
    val_tokens: 2048
train:
  batch_size: 2
  seq_len: 16
  steps: 4
  lr: 1.0e-3
  eval_batches: 1
  log_every: 0
runtime:
  threads: 1
  log_level: quiet
)";

// A 4-step run on both ranks with `stop` as the app's signal flag; returns its summary.
// collective: all ranks of MPI_COMM_WORLD
train::RunSummary run_with_stop(const std::string& name, train::StopCheck stop,
                                const std::vector<std::string>& extra = {}) {
    comm::World world(MPI_COMM_WORLD);
    const std::string d = std::string(SOF_BINARY_DIR) + "/test-scratch/train/" + name;
    if (world.rank() == 0) fs::remove_all(d);
    world.barrier();
    std::vector<std::string> ov = {"runtime.out_dir=" + d, "train.checkpoint_dir=" + d + "/ckpt"};
    ov.insert(ov.end(), extra.begin(), extra.end());
    config::Config cfg = config::load_deck_from_string(kDeck, name, ov);
    core::Log log(world.rank(), core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    t.set_stop_check(std::move(stop));
    return t.run();
}

bool has_step(const std::string& name, const char* step_dir) {
    return fs::is_directory(std::string(SOF_BINARY_DIR) + "/test-scratch/train/" + name + "/ckpt/" +
                            step_dir);
}

} // namespace

TEST_CASE("a stop on one rank right after a checkpointed step: the ranks agree, nobody waits in a "
          "save the others skip") {
    comm::World world(MPI_COMM_WORLD);
    // only the last rank is signalled, during step 2; every step writes a checkpoint, so the
    // step's checkpoint exists when the stop is seen (rank 0 alone knows its directory name)
    const bool mine = world.rank() == world.size() - 1;
    int calls = 0;
    train::RunSummary sum =
        run_with_stop("stop_after_ckpt", [&] { return mine && ++calls >= 2 ? SIGUSR1 : 0; },
                      {"train.checkpoint_every=1"});
    CHECK(sum.stopped);
    CHECK(sum.end_step == 2);
    CHECK(sum.stop_signal == (mine ? SIGUSR1 : 0));
    CHECK(has_step("stop_after_ckpt", "step_00000002"));
    CHECK_FALSE(has_step("stop_after_ckpt", "step_00000003"));
}

TEST_CASE(
    "a stop during the last step: checkpoint of the last step, no final evaluation, stopped") {
    int calls = 0; // asked once after each of the 4 steps: the 4th answer is the last step's
    train::RunSummary sum =
        run_with_stop("stop_last_step", [&] { return ++calls >= 4 ? SIGTERM : 0; });
    CHECK(sum.stopped);
    CHECK(sum.end_step == 4);
    CHECK(sum.last_val_loss == 0.0f); // the final evaluation was skipped
    CHECK(has_step("stop_last_step", "step_00000004"));
}

TEST_CASE("a stop during the final evaluation: the evaluation result is kept, the run is stopped") {
    int calls = 0; // 4 answers after the steps, the 5th after the final evaluation
    train::RunSummary sum =
        run_with_stop("stop_final_eval", [&] { return ++calls >= 5 ? SIGTERM : 0; });
    CHECK(sum.stopped);
    CHECK(sum.end_step == 4);
    CHECK(sum.last_val_loss > 0.0f);
    CHECK(has_step("stop_final_eval", "step_00000004"));
}

TEST_CASE("debug.hold_for_stop: every rank waits after that step until a stop is requested") {
    comm::World world(MPI_COMM_WORLD);
    // the signal comes on rank 0 after many polls: without the hold the run would be over by then
    int calls = 0;
    const bool mine = world.rank() == 0;
    train::RunSummary sum =
        run_with_stop("hold_for_stop", [&] { return mine && ++calls >= 20 ? SIGUSR1 : 0; },
                      {"debug.hold_for_stop=1"});
    CHECK(sum.stopped);
    CHECK(sum.end_step == 1);
    if (mine) CHECK(calls == 20);
    CHECK(has_step("hold_for_stop", "step_00000001"));
}

TEST_CASE("a save that fails on one rank (a full disk) fails on every rank and leaves no partial "
          "directory") {
    comm::World world(MPI_COMM_WORLD);
    const std::string name = "save_fails";
    const std::string root = std::string(SOF_BINARY_DIR) + "/test-scratch/train/" + name + "/ckpt";
    // the last rank's files may not grow beyond 16 KiB (its metrics fit, its 60 KB shard does
    // not): its write fails with EFBIG like a full disk, while rank 0 writes its shard fine
    const bool mine = world.rank() == world.size() - 1;
    struct rlimit old {};
    ::getrlimit(RLIMIT_FSIZE, &old);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    if (mine) {
        struct rlimit small = old;
        small.rlim_cur = 16 << 10;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    }
    std::string msg;
    core::ErrorKind kind = core::ErrorKind::Internal;
    try {
        run_with_stop(name, [] { return 0; }, {"train.steps=1"});
    } catch (const core::Error& e) {
        msg = e.what();
        kind = e.kind();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    INFO("rank " << world.rank() << ": " << msg);
    CHECK(kind == core::ErrorKind::Io);
    if (world.size() > 1)
        CHECK(msg.find(mine ? "File too large" : "failed on another rank") != std::string::npos);
    world.barrier();
    // neither the step nor its temporary directory is left
    int entries = 0;
    for (const auto& e : fs::directory_iterator(root)) {
        const std::string f = e.path().filename().string();
        if (f == ".superoffload.lock") continue; // the run's directory lock
        INFO("left behind: " << e.path());
        entries++;
    }
    CHECK(entries == 0);
    world.barrier();
}

TEST_CASE("a run whose every step is skipped says so (the app exits non-zero); one skip does not") {
    train::RunSummary all =
        run_with_stop("all_skipped", [] { return 0; },
                      {"train.steps=3", "debug.inject_nonfinite_steps=[0, 1, 2]"});
    CHECK(all.skips == 3);
    CHECK(all.all_skipped);
    train::RunSummary some = run_with_stop("some_skipped", [] { return 0; },
                                           {"train.steps=3", "debug.inject_nonfinite_steps=[1]"});
    CHECK(some.skips == 1);
    CHECK_FALSE(some.all_skipped);
}

TEST_CASE("stop_agreed: one rank's signal stops every rank after the same step") {
    comm::World world(MPI_COMM_WORLD);
    int sig = -1;
    CHECK_FALSE(train::stop_agreed(train::StopCheck(), world, &sig)); // no check: never
    CHECK(sig == 0);
    CHECK_FALSE(train::stop_agreed([] { return 0; }, world, &sig));
    // only the last rank got the signal (one rank alone: it is that rank)
    const bool mine = world.rank() == world.size() - 1;
    train::StopCheck check = [mine] { return mine ? SIGUSR1 : 0; };
    CHECK(train::stop_agreed(check, world, &sig));
    CHECK(sig == (mine ? SIGUSR1 : 0));
    CHECK(train::signal_name(SIGTERM) == "SIGTERM");
    CHECK(train::signal_name(0) == "another rank's signal");
}

TEST_CASE("metrics: a line cut by a killed run is closed before appending; one writer per file; "
          "full disk throws") {
    comm::World world(MPI_COMM_WORLD);
    std::string d = scratch("metrics", world.rank());
    const std::string path = d + "/m.jsonl";
    {
        std::ofstream f(path);
        f << "{\"kind\":\"step\",\"step\":1}\n{\"kind\":\"step\",\"st"; // killed mid-line
    }
    {
        train::MetricsWriter w(path, true);
        w.write("resume", {{"step", 1}});
        w.close();
    }
    CHECK(slurp(path) == "{\"kind\":\"step\",\"step\":1}\n{\"kind\":\"step\",\"st\n{\"kind\":"
                         "\"resume\",\"step\":1}\n");
    {
        train::MetricsWriter first(path, true);
        bool refused = false;
        try {
            train::MetricsWriter second(path, true); // another run on the same file
        } catch (const core::Error& e) {
            refused = e.kind() == core::ErrorKind::Io &&
                      std::string(e.what()).find("in use by another superoffload run") !=
                          std::string::npos;
        }
        CHECK(refused);
    }
    bool threw = false;
    try {
        train::MetricsWriter w("/dev/full", false);
        w.write("step", {{"step", 1}});
    } catch (const core::Error& e) {
        threw = true;
        CHECK(e.kind() == core::ErrorKind::Io);
        CHECK(std::string(e.what()).find("/dev/full") != std::string::npos);
    }
    CHECK(threw);
}

TEST_CASE("DirLock: a second holder is refused with the first one's pid and host") {
    comm::World world(MPI_COMM_WORLD);
    std::string d = scratch("lock", world.rank());
    core::DirLock a(d + "/out", "runtime.out_dir");
    CHECK(a.held());
    CHECK(slurp(d + "/out/.superoffload.lock") == core::lock_owner_text() + "\n");
    std::string msg;
    try {
        core::DirLock b(d + "/out", "runtime.out_dir"); // flock: conflicts even in one process
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Io);
        msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("in use by another superoffload run (pid=" + std::to_string(getpid()) +
                   " host=") != std::string::npos);
    a.release();
    core::DirLock c(d + "/out", "runtime.out_dir"); // free again
    CHECK(c.held());
    std::ofstream(d + "/file") << "x";
    try {
        core::DirLock e(d + "/file", "train.checkpoint_dir");
        FAIL("a file is not a directory");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("is not a directory") != std::string::npos);
    }
}
