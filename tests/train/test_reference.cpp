// The real training loop (train::Trainer) against PyTorch: 10 AdamW steps with clipping from
// tests/data/gpt2_ref.bin, on the plain path, the SuperOffload engine and the synchronous engine.
#include "train/mpi_main.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/llmc.h"
#include "comm/world.h"
#include "config/deck.h"
#include "data/loader.h"
#include "data/shards.h"
#include "model/layout.h"
#include "model/model_test_util.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace sof;
using sof::testing::gpt2_ref;

namespace {

// Tolerances: the same rule as tests/model/test_model_reference.cpp (final params within
// kFinalAbs + the reference's fp32 sensitivity per element).
constexpr double kLossRel = 1e-5;
// grad norms of later steps see the params' accumulated fp32 differences (Adam amplifies them);
// measured 5.0e-6 at worst
constexpr double kNormRel = 5e-5;
constexpr double kFinalAbs = 1e-6;

std::string scratch_root() {
    return std::string(SOF_BINARY_DIR) + "/test-scratch/reference";
}

void write_shard(const std::string& path, const std::vector<int>& tokens) {
    std::vector<int32_t> header(data::kShardHeaderInts, 0);
    header[0] = data::kShardMagic;
    header[1] = data::kShardVersion;
    header[2] = static_cast<int32_t>(tokens.size());
    std::vector<uint16_t> body(tokens.begin(), tokens.end());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(header.data()),
            static_cast<std::streamsize>(header.size() * sizeof(int32_t)));
    f.write(reinterpret_cast<const char*>(body.data()),
            static_cast<std::streamsize>(body.size() * sizeof(uint16_t)));
    REQUIRE(f.good());
}

// The reference's rows are independent (T+1)-token windows: targets[b][T-1] is not inputs[b+1][0],
// so one llm.c stream of B*T+1 tokens cannot hold the batch. Instead every row is its own shard of
// exactly T+1 tokens, and a step is B micro-batches of one row (train.batch_size 1, grad_accum B):
// the sequential loader visits row 0, row 1, ..., wraps, so every step sees the reference's batch,
// and the mean of the micro-batch means is the reference's mean over B*T positions.
struct Scratch {
    std::string model;      // llm.c fp32 checkpoint of the reference's initial params
    std::string shard_glob; // one shard per reference row
};

const Scratch& scratch() {
    static const Scratch s = [] {
        const auto& ref = gpt2_ref();
        const std::string root = scratch_root();
        fs::remove_all(root);
        fs::create_directories(root + "/data");
        Scratch out;
        for (int b = 0; b < ref.B; b++) {
            std::vector<int> row(ref.inputs.begin() + static_cast<long>(b) * ref.T,
                                 ref.inputs.begin() + static_cast<long>(b + 1) * ref.T);
            for (int t = 0; t + 1 < ref.T; t++)
                REQUIRE_MESSAGE(ref.targets[static_cast<size_t>(b) * ref.T + t] == row[t + 1],
                                "reference targets are not the inputs shifted by one (row " << b
                                                                                            << ")");
            row.push_back(ref.targets[static_cast<size_t>(b) * ref.T + ref.T - 1]);
            char name[64];
            std::snprintf(name, sizeof name, "/data/row_%03d.bin", b);
            write_shard(root + name, row);
        }
        out.shard_glob = root + "/data/row_*.bin";
        const model::ParamLayout layout = model::make_layout(ref.config);
        const std::vector<float> p0 = sof::testing::ref_to_flat(layout, ref.params);
        out.model = root + "/init.bin";
        ckpt::export_llmc(out.model, ref.config, layout, p0.data());
        return out;
    }();
    return s;
}

std::string deck_text() {
    const auto& ref = gpt2_ref();
    std::ostringstream d;
    d.precision(17);
    d << "data:\n  shuffle: false\n"
      << "train:\n"
      << "  batch_size: 1\n"
      << "  seq_len: " << ref.T << "\n"
      << "  grad_accum: " << ref.B << "\n"
      << "  steps: " << ref.steps << "\n"
      << "  lr: " << ref.lr << "\n"
      << "  warmup_steps: 0\n"
      << "  schedule: constant\n"
      << "  grad_clip: " << ref.grad_clip << "\n"
      << "  eval_batches: 1\n"
      << "  log_every: 0\n"
      << "optimizer:\n"
      << "  type: adamw\n"
      << "  beta1: " << ref.beta1 << "\n"
      << "  beta2: " << ref.beta2 << "\n"
      << "  eps: " << ref.eps << "\n"
      << "  weight_decay: " << ref.weight_decay << "\n"
      << "  bias_correction: true\n"
      << "runtime:\n  threads: 1\n  log_level: quiet\n";
    return d.str();
}

config::Config make_config(const std::string& name, const std::vector<std::string>& extra) {
    const Scratch& s = scratch();
    std::vector<std::string> ov = {"model.init_from=" + s.model, "data.train=" + s.shard_glob,
                                   "data.val=" + s.shard_glob,
                                   "runtime.out_dir=" + scratch_root() + "/" + name};
    ov.insert(ov.end(), extra.begin(), extra.end());
    return config::load_deck_from_string(deck_text(), "reference-" + name, ov);
}

struct Result {
    train::RunSummary summary;
    std::vector<float> params;
};

Result train_run(const config::Config& cfg) {
    comm::World world(MPI_COMM_WORLD);
    core::Log log(0, core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    Result r;
    r.summary = t.run();
    r.params = t.params();
    return r;
}

// Per-step series (losses, grad norms) against the reference: every step within rel_tol; returns
// the largest relative error.
double check_series(const std::string& name, const char* what, const std::vector<float>& got,
                    const std::vector<float>& want, int steps, double rel_tol) {
    REQUIRE(got.size() == static_cast<size_t>(steps));
    double worst = 0.0;
    for (size_t i = 0; i < static_cast<size_t>(steps); i++) {
        const double g = got[i], w = want[i];
        const double rel = std::fabs(g - w) / std::fabs(w);
        worst = std::max(worst, rel);
        INFO(name << ": step " << i << " " << what << " " << g << " (ref " << w << ")");
        CHECK(rel <= rel_tol);
    }
    return worst;
}

// Compares a run with the reference; prints one summary line per path and, per tensor, the
// max error (shown by doctest when a check fails).
void check_against_reference(const std::string& name, const Result& r) {
    const auto& ref = gpt2_ref();
    const model::ParamLayout layout = model::make_layout(ref.config);
    REQUIRE(r.params.size() == layout.num_params);
    const double loss_rel =
        check_series(name, "loss", r.summary.train_losses, ref.train_losses, ref.steps, kLossRel);
    // the global grad norm before clipping (decides which steps clip)
    const double norm_rel =
        check_series(name, "grad norm", r.summary.grad_norms, ref.train_norms, ref.steps, kNormRel);
    MESSAGE(name << ": grad norms max rel error " << norm_rel);
    double worst_abs = 0.0, worst_ratio = 0.0;
    std::string worst_name;
    for (int k = 0; k < model::kNumGpt2TensorKinds; k++) {
        const auto kind = static_cast<model::TensorKind>(k);
        const std::string tname = model::tensor_kind_name(kind);
        const std::vector<float> got = sof::testing::flat_to_llmc(layout, r.params.data(), kind);
        const auto& want = ref.final_params.at(tname).data;
        const auto& sens = ref.final_sens.at(tname).data;
        REQUIRE(got.size() == want.size());
        double max_abs = 0.0, ratio = 0.0;
        size_t over = 0;
        bool finite = true;
        for (size_t i = 0; i < got.size(); i++) {
            finite &= std::isfinite(got[i]);
            const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
            const double tol = kFinalAbs + sens[i];
            max_abs = std::max(max_abs, e);
            ratio = std::max(ratio, e / tol);
            over += e > tol;
        }
        std::printf("  %-16s %-9s max abs err %.3e, worst element uses %.2f of its tolerance\n",
                    name.c_str(), tname.c_str(), max_abs, ratio);
        if (ratio > worst_ratio) worst_name = tname;
        worst_abs = std::max(worst_abs, max_abs);
        worst_ratio = std::max(worst_ratio, ratio);
        INFO(name << ": " << tname << " max abs err " << max_abs << ", worst element uses " << ratio
                  << " of its tolerance, " << over << " of " << got.size() << " over");
        CHECK(finite);
        CHECK(over == 0);
    }
    std::printf("  %-24s loss rel err %.2e | final params max abs err %.2e, worst element uses "
                "%.2f of its tolerance (%s)\n",
                name.c_str(), loss_rel, worst_abs, worst_ratio, worst_name.c_str());
    std::fflush(stdout);
}

void check_path(const std::string& name, const std::vector<std::string>& extra) {
    check_against_reference(name, train_run(make_config(name, extra)));
}

const std::vector<std::string> kEngine = {"offload.enabled=true", "device.type=host",
                                          "offload.bucket_mb=0.01", "offload.gpu_tail_buckets=1",
                                          "offload.stv=true"};

} // namespace

TEST_CASE("reference batch: the loader's micro-batches are the reference's rows, every step") {
    const auto& ref = gpt2_ref();
    const config::Config cfg = make_config("loader", {});
    data::DataLoader dl(cfg.data, data::Split::Train, ref.config.vocab_size, 1, ref.T, 0, 1);
    std::vector<int> in(static_cast<size_t>(ref.T)), tg(static_cast<size_t>(ref.T));
    for (int i = 0; i < 3 * ref.B; i++) { // three steps' worth: the order wraps
        dl.next(in.data(), tg.data());
        const size_t row = static_cast<size_t>(i % ref.B) * ref.T;
        CAPTURE(i);
        CHECK(std::equal(in.begin(), in.end(), ref.inputs.begin() + static_cast<long>(row)));
        CHECK(std::equal(tg.begin(), tg.end(), ref.targets.begin() + static_cast<long>(row)));
    }
}

TEST_CASE("PyTorch reference through the trainer: plain path") {
    check_path("plain", {});
}

TEST_CASE("PyTorch reference through the trainer: SuperOffload engine with STV") {
    check_path("engine", kEngine);
}

TEST_CASE("PyTorch reference through the trainer: synchronous engine") {
    std::vector<std::string> ov = kEngine;
    ov.push_back("offload.schedule=synchronous");
    check_path("engine_sync", ov);
}

// The step's time split (trainer.cpp: timing events on the compute stream around each
// micro-batch's forward and backward): both parts are device time inside the step, so each is
// positive and together they fit in the step's wall time (the host device's events read the same
// steady clock as the step timer, on the stream's thread when it reaches them).
TEST_CASE("the step's time split: forward and backward are device time inside the step") {
    Result r = train_run(make_config("split", kEngine));
    REQUIRE(!r.summary.step_times.empty());
    for (const train::StepTimes& st : r.summary.step_times) {
        INFO("step " << st.ms << " ms: forward " << st.forward_ms << ", backward "
                     << st.backward_ms);
        CHECK(st.forward_ms > 0.0);
        CHECK(st.backward_ms > 0.0);
        CHECK(st.forward_ms + st.backward_ms <= st.ms);
    }
}

TEST_CASE("PyTorch reference through the trainer: checkpoint, export to llm.c, bitwise") {
    const auto& ref = gpt2_ref();
    const std::string ckpt_dir = scratch_root() + "/export/ckpt";
    std::vector<std::string> ov = kEngine;
    ov.push_back("train.checkpoint_dir=" + ckpt_dir);
    const Result r = train_run(make_config("export", ov));
    check_against_reference("export (engine)", r);

    // what `superoffload export --llmc OUT CKPT_ROOT` does (app/cmd_export.cpp)
    const std::string latest = ckpt::find_latest(ckpt_dir);
    REQUIRE(!latest.empty());
    CHECK(latest == r.summary.last_checkpoint);
    ckpt::Manifest m;
    std::vector<float> saved;
    ckpt::load_params(latest, &m, &saved);
    CHECK(m.step == ref.steps);
    CHECK(m.opt_step == ref.steps);
    const model::ParamLayout layout = model::make_layout(m.model);
    REQUIRE(saved.size() == layout.num_params);
    const std::string out = scratch_root() + "/export/model.bin";
    ckpt::export_llmc(out, m.model, layout, saved.data());

    const model::ArchConfig hc = ckpt::read_llmc_header(out);
    CHECK(hc.max_seq_len == ref.config.max_seq_len);
    CHECK(hc.vocab_size == ref.config.vocab_size);
    CHECK(hc.padded_vocab_size == ref.config.padded_vocab_size);
    CHECK(hc.num_layers == ref.config.num_layers);
    CHECK(hc.num_heads == ref.config.num_heads);
    CHECK(hc.channels == ref.config.channels);

    // the file's tensors, read raw at llm.c offsets, equal Trainer::params() bitwise
    std::ifstream f(out, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t header = static_cast<size_t>(ckpt::kLlmcHeaderInts) * 4;
    REQUIRE(bytes.size() == header + 4 * layout.num_params);
    for (const model::TensorInfo& t : layout.tensors) {
        const size_t at = header + 4 * ckpt::llmc_offset(m.model, t.kind, t.layer);
        const bool same =
            std::memcmp(bytes.data() + at, r.params.data() + t.offset, t.numel * 4) == 0;
        CAPTURE(model::tensor_kind_name(t.kind));
        CAPTURE(t.layer);
        CHECK(same);
    }
}
