// Multi-rank failures end the whole job quickly with a message naming the rank (never a hang):
// a rank that throws, a rank that dies (SIGKILL), ranks that disagree on the deck.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "launch.h"
#include "mpi/parallel_util.h"

namespace {

struct Result {
    int status = -1;
    std::string out;
    double seconds = 0;
};

// mpiexec -n 2 of the program under `timeout 120` (a hang fails the test with status 124).
Result run_job(const std::string& args) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(SOF_BINARY_DIR) / "test-scratch" / "mpi_failure";
    fs::create_directories(dir);
    std::ofstream(dir / "deck.yaml") << sof::test::kParallelDeck;
    std::string cmd = "cd '" + dir.string() +
                      "' && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                      "OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 timeout 120 " +
                      args + " 2>&1";
    auto t0 = std::chrono::steady_clock::now();
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        r.out.append(buf, n);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

const std::string kTrain = sof::test::mpiexec(2) + sof::test::program() +
                           " train deck.yaml --set train.batch_size=2 "
                           "--set train.steps=6 --set offload.enabled=true ";

} // namespace

TEST_CASE("a rank that throws at step s ends the job with its message") {
    Result r = run_job(kTrain + "--set debug.fail_rank=1 --set debug.fail_step=3");
    INFO(r.out);
    CHECK(r.status != 0);
    CHECK(r.status != 124); // not a hang
    CHECK(r.out.find("[rank 1] superoffload: runtime error: debug.fail_rank = 1: rank 1 fails at "
                     "step 3") != std::string::npos);
    MESSAGE("throwing rank: job ended in " << r.seconds << " s");
    CHECK(r.seconds < 60);
}

TEST_CASE("a rank that dies (SIGKILL) ends the job, naming the rank") {
    Result r = run_job(kTrain + "--set debug.fail_rank=1 --set debug.fail_step=2 "
                                "--set debug.fail_hard=true");
    INFO(r.out);
    CHECK(r.status != 0);
    CHECK(r.status != 124);
    // Open MPI: "process rank 1 ... exited on signal 9"; MPICH's Hydra: "RANK 1 ... KILLED BY
    // SIGNAL: 9"
    std::string low = r.out;
    for (char& c : low)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    CHECK(low.find("rank 1") != std::string::npos);
    CHECK(
        (low.find("signal 9") != std::string::npos || low.find("signal: 9") != std::string::npos));
    MESSAGE("killed rank: job ended in " << r.seconds << " s");
    CHECK(r.seconds < 60);
}

TEST_CASE("ranks that disagree on the deck fail together with one message") {
    const std::string prog = sof::test::program();
    Result r =
        run_job(sof::test::mpiexec(1) + prog + " train deck.yaml --set train.batch_size=2 : -n 1 " +
                prog + " train deck.yaml --set train.batch_size=2 --set train.lr=0.01");
    INFO(r.out);
    CHECK(r.status == 2); // a config error, every rank exits with its code
    CHECK(r.out.find("disagree on the deck: the effective deck of rank(s) 1 differs from rank "
                     "0's") != std::string::npos);
    CHECK(r.seconds < 60);
}

TEST_CASE("parallel.sp that does not divide the heads, the sequence or the ranks: config error") {
    Result heads = run_job(kTrain + "--set parallel.sp=4");
    INFO(heads.out);
    CHECK(heads.status == 2);
    CHECK(heads.out.find("model.num_heads = 2 is not divisible by parallel.sp = 4") !=
          std::string::npos);
    Result ranks = run_job(kTrain + "--set parallel.sp=4 --set model.num_heads=4");
    INFO(ranks.out);
    CHECK(ranks.status == 2);
    CHECK(ranks.out.find("parallel.sp = 4 does not divide the 2 ranks") != std::string::npos);
    Result seq = run_job(kTrain + "--set parallel.sp=2 --set train.seq_len=15");
    INFO(seq.out);
    CHECK(seq.status == 2);
    CHECK(seq.out.find("train.seq_len = 15") != std::string::npos);
}

TEST_CASE("train.resume: auto takes rank 0's choice; a rank that cannot see it fails every rank") {
    // Two working directories (mpiexec -wdir per rank) hold different checkpoints under the
    // same relative train.checkpoint_dir: a rank that picked its own newest one (before) resumed
    // rank 1 from step 3 and rank 0 from step 2, and the ranks trained different runs (a hang or
    // a wrong result). Now rank 0 chooses, and rank 1, which lacks that directory, fails the job
    // on every rank with a config error.
    namespace fs = std::filesystem;
    const fs::path base = fs::path(SOF_BINARY_DIR) / "test-scratch" / "mpi_failure_resume";
    fs::remove_all(base);
    const std::string prog = sof::test::program();
    const std::string deck =
        " train deck.yaml --set train.batch_size=2 --set train.checkpoint_dir=ck";
    for (const char* d : {"a", "b"}) {
        fs::create_directories(base / d);
        std::ofstream(base / d / "deck.yaml") << sof::test::kParallelDeck;
    }
    // a: a checkpoint at step 2; b: at step 3 (each written by a 2-rank run there)
    for (const auto& [dir, steps] : {std::pair<const char*, int>{"a", 2}, {"b", 3}}) {
        Result w = run_job(sof::test::mpiexec(2) + "-wdir '" + (base / dir).string() + "' " + prog +
                           deck + " --set train.steps=" + std::to_string(steps));
        INFO(w.out);
        REQUIRE(w.status == 0);
    }
    REQUIRE(fs::is_directory(base / "a/ck/step_00000002"));
    REQUIRE(fs::is_directory(base / "b/ck/step_00000003"));
    const std::string resume = deck + " --set train.steps=4 --set train.resume=auto";
    Result r = run_job(sof::test::mpiexec(1) + "-wdir '" + (base / "a").string() + "' " + prog +
                       resume + " : -n 1 -wdir '" + (base / "b").string() + "' " + prog + resume);
    INFO(r.out);
    CHECK(r.status == 2); // a config error, every rank exits with its code (not a hang: 124)
    CHECK(r.out.find("train.resume = auto: rank 0 chose ck/step_00000002 as the newest "
                     "checkpoint") != std::string::npos);
    CHECK(r.out.find("rank(s) 1 do not see that directory") != std::string::npos);
    // both ranks see the same directory (b/ck a link to a/ck, as on a shared file system):
    // they resume together from rank 0's choice and train on
    fs::remove_all(base / "b/ck");
    fs::create_directory_symlink(base / "a/ck", base / "b/ck");
    r = run_job(sof::test::mpiexec(1) + "-wdir '" + (base / "a").string() + "' " + prog + resume +
                " --set runtime.log_level=info : -n 1 -wdir '" + (base / "b").string() + "' " +
                prog + resume + " --set runtime.log_level=info");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("resume: ck/step_00000002") != std::string::npos);
}
