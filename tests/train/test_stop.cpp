// Pieces of a run that survives: the stop decision agreed by all ranks (run with 2 ranks), the
// metrics writer's checked writes and cut-line repair, and the advisory directory lock.
#include "train/mpi_main.h"

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "comm/world.h"
#include "core/error.h"
#include "core/lockfile.h"
#include "train/metrics.h"
#include "train/stop.h"

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

} // namespace

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
