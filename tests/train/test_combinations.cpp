// Every distinct engine option combination (schedule x weights x cast x tails x stv x dtype)
// trained in-process through train::Trainer with a NaN injected (debug.inject_nonfinite_steps, the
// --set path) and clipping, bitwise equal to the plain path; inverse rollback's drift is bounded.
#include "train/mpi_main.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/world.h"
#include "config/deck.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace sof;

namespace {

const std::string kDeck = std::string(SOF_SOURCE_DIR) + "/inputs/tiny.yaml";
constexpr int kSteps = 6;

struct Run {
    std::vector<float> losses; // (steps)
    std::vector<float> params; // (num_params)
    train::RunSummary sum;
};

// tiny.yaml made smaller and shorter: 2 layers, 6 steps, NaN at step 2, clipping at 0.1 (hit).
Run run(const std::string& name, const std::vector<std::string>& extra) {
    std::string dir = std::string(SOF_BINARY_DIR) + "/test-scratch/combinations/" + name;
    fs::remove_all(dir);
    std::vector<std::string> ov = {
        "runtime.out_dir=" + dir,   "train.checkpoint_dir=",
        "train.checkpoint_every=0", "train.steps=" + std::to_string(kSteps),
        "train.eval_batches=1",     "train.eval_every=0",
        "train.log_every=0",        "train.batch_size=2",
        "train.warmup_steps=1",     "train.grad_clip=0.1",
        "model.num_layers=2",       "model.channels=64",
        "offload.bucket_mb=0.05",   "debug.inject_nonfinite_steps=[2]",
        "runtime.log_level=quiet",  "runtime.threads=1"};
    ov.insert(ov.end(), extra.begin(), extra.end());
    config::Config cfg = config::load_deck(kDeck, ov);
    comm::World world(MPI_COMM_WORLD);
    core::Log log(0, core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    Run r;
    r.sum = t.run();
    r.losses = r.sum.train_losses;
    r.params = t.params();
    return r;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

} // namespace

TEST_CASE("combinations: every distinct engine configuration == plain, bitwise") {
    int n = 0;
    for (std::string dt : {"fp32", "bf16"}) {
        Run plain = run("plain_" + dt, {"train.dtype=" + dt, "offload.enabled=false"});
        REQUIRE(plain.losses.size() == static_cast<size_t>(kSteps));
        CHECK(std::isnan(plain.sum.grad_norms[2]));
        CHECK(plain.sum.skips == 1);
        int clipped = 0;
        for (float g : plain.sum.grad_norms)
            clipped += std::isfinite(g) && g > 0.1f;
        REQUIRE(clipped >= 1); // the clip path runs
        // with bf16 and cast host the plain path rounds grads to bf16 as the engine moves them
        Run plain_host =
            dt == "bf16" ? run("plain_bf16_cast-host",
                               {"train.dtype=bf16", "offload.enabled=false", "offload.cast=host"})
                         : plain;
        for (std::string sch : {"superoffload", "interleaved", "synchronous"})
            for (std::string w : {"stationary", "flow"})
                for (std::string cast : {"host", "device"})
                    for (int tail : {0, 1})
                        for (std::string stv : {"true", "false"}) {
                            if (dt == "fp32" && cast == "device") continue;       // cast: bf16 only
                            if (sch == "synchronous" && stv == "false") continue; // no STV
                            std::string name = dt + "_" + sch + "_" + w + "_cast-" + cast +
                                               "_tail" + std::to_string(tail) + "_stv-" + stv;
                            CAPTURE(name);
                            std::vector<std::string> ov = {
                                "train.dtype=" + dt,
                                "offload.enabled=true",
                                "offload.schedule=" + sch,
                                "offload.weights=" + w,
                                "offload.cast=" + cast,
                                "offload.stv=" + stv,
                                "offload.interleave_k=2",
                                "offload.gpu_tail_buckets=" + std::to_string(tail)};
                            const Run& ref = cast == "host" ? plain_host : plain;
                            Run e = run(name, ov);
                            CHECK(same(e.losses, ref.losses));
                            CHECK(same(e.params, ref.params));
                            CHECK(e.sum.skips == 1);
                            CHECK(e.sum.commits == kSteps - 1);
                            n++;
                        }
    }
    MESSAGE(n << " distinct combinations bitwise equal to the plain path");
    CHECK(n == 60);
}

TEST_CASE("combinations: inverse rollback drift after a skip and clipped re-runs") {
    for (std::string dt : {"fp32", "bf16"}) {
        CAPTURE(dt);
        Run plain = run("inv_plain_" + dt, {"train.dtype=" + dt, "offload.enabled=false"});
        Run inv = run("inv_" + dt, {"train.dtype=" + dt, "offload.enabled=true",
                                    "offload.rollback=inverse", "offload.stv=true"});
        REQUIRE(inv.params.size() == plain.params.size());
        double maxd = 0, maxp = 0;
        for (size_t i = 0; i < inv.params.size(); i++) {
            maxd = std::max(maxd, static_cast<double>(std::fabs(inv.params[i] - plain.params[i])));
            maxp = std::max(maxp, static_cast<double>(std::fabs(plain.params[i])));
        }
        MESSAGE(dt << ": inverse rollback, " << kSteps << " steps (1 skip, " << inv.sum.rollbacks
                   << " rollbacks): max |dp| = " << maxd << " (max |p| = " << maxp << ")");
        CHECK(inv.sum.rollbacks >= 2);
        CHECK(inv.sum.skips == 1);
        CHECK(maxd < 1e-5);
    }
}

TEST_CASE("demo: inputs/tiny.yaml clips (and rolls back) only during warm-up") {
    std::string dir = std::string(SOF_BINARY_DIR) + "/test-scratch/combinations/demo";
    fs::remove_all(dir);
    // the demo deck as it is, its first 30 steps (same cosine schedule: train.stop_after)
    config::Config cfg = config::load_deck(
        kDeck, {"runtime.out_dir=" + dir, "train.checkpoint_dir=", "train.checkpoint_every=0",
                "train.stop_after=30", "train.eval_batches=1", "train.log_every=0",
                "runtime.log_level=quiet", "runtime.threads=1"});
    REQUIRE(cfg.offload.enabled);
    REQUIRE(cfg.offload.stv == config::Stv::On);
    comm::World world(MPI_COMM_WORLD);
    core::Log log(0, core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    train::RunSummary s = t.run();
    REQUIRE(s.grad_norms.size() == 30);
    int clipped = 0, after_warmup = 0;
    for (size_t i = 0; i < s.grad_norms.size(); i++) {
        bool c = s.grad_norms[i] > cfg.train.grad_clip;
        clipped += c;
        after_warmup += c && static_cast<int>(i) >= cfg.train.warmup_steps;
    }
    MESSAGE("tiny.yaml, 30 steps: " << s.commits << " commits, " << s.skips << " skips, "
                                    << s.rollbacks << " rollbacks, " << clipped << " clipped");
    CHECK(s.commits == 30);
    CHECK(s.skips == 0);
    CHECK(s.rollbacks == clipped); // every rollback is a clipped step re-run
    CHECK(clipped <= 5);
    CHECK(after_warmup == 0);
}

// Integer value of "key": in a JSONL line (-1 when absent).
static long long json_int(const std::string& line, const std::string& key) {
    size_t at = line.find("\"" + key + "\":");
    if (at == std::string::npos) return -1;
    return std::stoll(line.substr(at + key.size() + 3));
}

TEST_CASE("metrics: the JSONL step records carry the link bytes, bf16 grads with cast host") {
    long long grads[2] = {0, 0}, params[2] = {0, 0};
    size_t n = 0;
    for (int host = 0; host < 2; host++) {
        std::string name = host ? "bytes_cast-host" : "bytes_cast-device";
        Run r = run(name, {"train.dtype=bf16", "offload.enabled=true",
                           std::string("offload.cast=") + (host ? "host" : "device"),
                           "debug.inject_nonfinite_steps=[]", "train.grad_clip=0"});
        n = r.params.size();
        std::ifstream in(std::string(SOF_BINARY_DIR) + "/test-scratch/combinations/" + name +
                         "/metrics.jsonl");
        std::string line;
        int steps = 0;
        while (std::getline(in, line)) {
            if (line.find("\"kind\":\"step\"") == std::string::npos) continue;
            steps++;
            long long g = json_int(line, "grads_d2h_bytes");
            long long p = json_int(line, "params_h2d_bytes");
            if (steps == 1) grads[host] = g, params[host] = p;
            CHECK(g == grads[host]); // the same every step (no clip, no skip)
            CHECK(json_int(line, "state_h2d_bytes") == 0);
            CHECK(json_int(line, "commits") == steps);
        }
        CHECK(steps == kSteps);
    }
    // tiny.yaml keeps one tail bucket on the device: its grads and weights do not cross
    CHECK(grads[0] == 2 * grads[1]);   // fp32 vs bf16 grads
    CHECK(params[0] == 2 * params[1]); // fp32 vs bf16 working weights
    CHECK(grads[1] > 0);
    CHECK(static_cast<size_t>(grads[1]) < 2 * n);
}
