// Runs that survive the scheduler and hostile input, end to end through the program: a real
// SIGTERM mid-run (step finished, checkpoint, exit 75, bitwise resume), a second signal, one run
// per directory, full disks, unusable paths, special deck files, garbage bytes in messages,
// an export into the checkpoint it reads, a resume of a different run, stale save leftovers.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "e2e/cli.h"
#include "e2e/spawn.h"
#include "launch.h"

using namespace sof::test;
namespace fs = std::filesystem;

namespace {

// Tiny and fast (about a millisecond per step). The signal tests hold the run after step 3
// (debug.hold_for_stop) and signal it there, so no test races the machine's speed.
const char* kDeck = R"(model:
  num_layers: 1
  num_heads: 2
  channels: 32
  max_seq_len: 16
  vocab_size: 64
data:
  builtin:
    train_tokens: 16384
    val_tokens: 2048
train:
  batch_size: 2
  seq_len: 16
  steps: 200
  lr: 3.0e-3
  schedule: cosine
  warmup_steps: 5
  eval_batches: 1
  log_every: 1
  checkpoint_dir: ckpt
runtime:
  out_dir: out
  threads: 1
)";

bool has(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::vector<std::string> step_dirs(const std::string& root) {
    std::vector<std::string> v;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))
        if (e.path().filename().string().rfind("step_", 0) == 0)
            v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
}

void check_rc(const RunResult& r, int code, const std::vector<std::string>& needles) {
    INFO("output:\n" << r.output);
    CHECK(r.exit_code == code);
    for (const std::string& n : needles)
        CHECK_MESSAGE(has(r.output, n), "missing '" << n << "'");
    CHECK_FALSE(has(r.output, "internal error"));
}

} // namespace

TEST_CASE("SIGTERM mid-run: the step finishes, a checkpoint is written, exit 75, bitwise resume; "
          "a second run on the same directories is refused naming the holder") {
    std::string d = scratch_dir("survive_sigterm");
    write_text(d + "/deck.yaml", kDeck);

    // the run holds after step 3 (debug.hold_for_stop) until a stop arrives, holding its locks,
    // however fast or slow the machine is
    Spawned a(d, {"train", "deck.yaml", "--set", "debug.hold_for_stop=3"});
    REQUIRE_MESSAGE(a.wait_for("holding after step 3 ", 120), a.output());
    RunResult b = run_superoffload("train deck.yaml", d);
    check_rc(b, 3,
             {"runtime.out_dir 'out' is in use by another superoffload run",
              "pid=" + std::to_string(a.pid()) + " host="});
    RunResult b2 = run_superoffload("train deck.yaml --set runtime.out_dir=other", d);
    check_rc(b2, 3, {"train.checkpoint_dir 'ckpt' is in use", "pid=" + std::to_string(a.pid())});
    a.signal(SIGTERM);
    int st = a.wait();
    INFO("interrupted run:\n" << a.output());
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 75);
    CHECK(has(a.output(), "stop: SIGTERM, stopped after step "));
    std::vector<std::string> steps = step_dirs(d + "/ckpt");
    REQUIRE(steps.size() == 1); // checkpoint_every 0: only the one the signal asked for
    const int stopped_at = std::stoi(steps[0].substr(5));
    CHECK(stopped_at == 3);
    std::string metrics = slurp(d + "/out/metrics.jsonl");
    CHECK(has(metrics, "{\"kind\":\"stop\",\"step\":" + std::to_string(stopped_at) +
                           ",\"signal\":" + std::to_string(SIGTERM) + "}\n"));
    CHECK_FALSE(has(metrics, "\"kind\":\"summary\""));

    RunResult resumed = run_superoffload("train deck.yaml --set train.resume=auto", d);
    check_rc(resumed, 0, {"resume: ckpt/" + steps[0]});
    metrics = slurp(d + "/out/metrics.jsonl");
    CHECK(has(metrics, "{\"kind\":\"resume\",\"step\":" + std::to_string(stopped_at) + "}\n"));

    RunResult ref = run_superoffload(
        "train deck.yaml --set runtime.out_dir=ref --set train.checkpoint_dir=refck", d);
    check_rc(ref, 0, {});
    for (const char* f : {"params.bin", "exp_avg.bin", "exp_avg_sq.bin"}) {
        std::string x = slurp(d + "/ckpt/step_00000200/" + f);
        std::string y = slurp(d + "/refck/step_00000200/" + f);
        CHECK_MESSAGE(!x.empty(), f);
        CHECK_MESSAGE(x == y, f << " differs between the interrupted+resumed and the whole run");
    }
}

TEST_CASE("a second stop signal ends the run at once, without a checkpoint") {
    std::string d = scratch_dir("survive_twice");
    write_text(d + "/deck.yaml", kDeck);
    Spawned a(d, {"train", "deck.yaml", "--set", "debug.hold_for_stop=3"});
    REQUIRE_MESSAGE(a.wait_for("holding after step 3 ", 120), a.output());
    a.signal(SIGSTOP); // both signals pending at once: the second arrives before the stop is seen
    a.signal(SIGTERM);
    a.signal(SIGINT);
    a.signal(SIGCONT);
    int st = a.wait();
    INFO(a.output());
    REQUIRE(WIFSIGNALED(st));
    CHECK((WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGINT));
    CHECK(has(a.output(), "second stop signal"));
    CHECK(step_dirs(d + "/ckpt").empty());
}

TEST_CASE("metrics on a full disk is an I/O error, not an empty file with exit 0") {
    std::string d = scratch_dir("survive_full");
    write_text(d + "/deck.yaml", kDeck);
    RunResult r =
        run_superoffload("train deck.yaml --set train.steps=2 --set train.metrics=/dev/full", d);
    check_rc(r, 3, {"metrics file '/dev/full'", "No space left on device"});
}

namespace {

// Files this process and its children write may not grow beyond `bytes` while it lives; a write
// past the limit fails with EFBIG (SIGXFSZ ignored), the way a full disk fails it.
struct FileSizeLimit {
    struct rlimit old {};
    void (*old_handler)(int) = nullptr;
    explicit FileSizeLimit(rlim_t bytes) {
        ::getrlimit(RLIMIT_FSIZE, &old);
        old_handler = std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = old;
        small.rlim_cur = bytes;
        ::setrlimit(RLIMIT_FSIZE, &small);
    }
    ~FileSizeLimit() {
        ::setrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, old_handler);
    }
};

std::vector<std::string> tmp_dirs(const std::string& root) {
    std::vector<std::string> v;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))
        if (e.path().filename().string().rfind(".tmp-step_", 0) == 0)
            v.push_back(e.path().filename().string());
    return v;
}

} // namespace

TEST_CASE("a failed save (a full disk) leaves no temporary directory behind: 1 and 2 ranks") {
    std::string d = scratch_dir("survive_save_fails");
    write_text(d + "/deck.yaml", kDeck);
    // injected: a 32 KiB file size limit (the metrics fit, a 68 KB shard file does not; PMIx's
    // shared-memory store would not fit either: its hash store keeps MPI_Init in memory)
    RunResult r;
    {
        FileSizeLimit limit(32 << 10);
        r = run_command("PMIX_MCA_gds=hash " + program() + " train deck.yaml --set train.steps=2",
                        d);
    }
    check_rc(r, 3, {"File too large"});
    CHECK(tmp_dirs(d + "/ckpt").empty());
    CHECK(step_dirs(d + "/ckpt").empty());
    // a real full disk: the checkpoints on a 128 KiB tmpfs (needs mount rights: root in CI)
    fs::create_directories(d + "/small");
    if (std::system(("mount -t tmpfs -o size=128k tmpfs '" + d + "/small' 2>/dev/null").c_str()) !=
        0) {
        MESSAGE("no tmpfs mount here (not root?): the real full-disk part is skipped");
        return;
    }
    r = run_superoffload("train deck.yaml --set train.steps=2 --set train.checkpoint_dir=small", d);
    check_rc(r, 3, {"No space left on device"});
    CHECK(tmp_dirs(d + "/small").empty());
    CHECK(step_dirs(d + "/small").empty());
    // two ranks (ZeRO-3: each writes its half): whichever rank fails, the directory goes
    r = run_command(mpiexec(2) + program() +
                        " train deck.yaml --set train.steps=2 "
                        "--set train.checkpoint_dir=small --set train.batch_size=1",
                    d);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(has(r.output, "No space left on device"));
    CHECK(tmp_dirs(d + "/small").empty());
    CHECK(step_dirs(d + "/small").empty());
    CHECK(std::system(("umount '" + d + "/small'").c_str()) == 0);
}

TEST_CASE("a FIFO among the token shards is refused at once, not opened and waited on") {
    std::string d = scratch_dir("survive_fifo_shard");
    std::string deck = kDeck;
    deck.replace(deck.find("data:\n"), 6, "data:\n  train: shards/*.bin\n");
    write_text(d + "/deck.yaml", deck);
    fs::create_directories(d + "/shards");
    {
        std::vector<int32_t> header(256, 0);
        header[0] = 20240520;
        header[1] = 1;
        header[2] = 4096;
        std::vector<uint16_t> tokens(4096);
        for (size_t i = 0; i < tokens.size(); i++)
            tokens[i] = static_cast<uint16_t>((i * 7 + 3) % 64);
        std::ofstream f(d + "/shards/a.bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(header.data()), 1024);
        f.write(reinterpret_cast<const char*>(tokens.data()), 8192);
    }
    REQUIRE(::mkfifo((d + "/shards/b.bin").c_str(), 0644) == 0);
    // before: the loader blocked in fopen, and SIGTERM did not end it (ctest's timeout did);
    // without checkpoints no data fingerprint looks at the files first
    check_rc(run_superoffload("train deck.yaml --set train.steps=2 --set train.checkpoint_dir=", d),
             3, {"shards/b.bin", "not a regular file"});
    // with checkpoints the fingerprint of the shards refuses it (it never opened files)
    check_rc(run_superoffload("train deck.yaml --set train.steps=2", d), 3,
             {"shards/b.bin", "not a regular file"});
}

TEST_CASE("a config.json with 2^31-1 layers or vocabulary is refused at once, naming the key and "
          "the bound") {
    std::string d = scratch_dir("survive_huge_hf");
    write_text(d + "/deck.yaml", kDeck);
    // before: make_layout grew memory at ~90 MB/s, 26 s until an out-of-memory message. The run
    // gets 60 s of CPU time (a refusal takes well under a second on any machine): a regression
    // to that growth ends in SIGXCPU and fails this test instead of waiting for ctest's timeout.
    const struct {
        const char* key;
        const char* bound;
    } cases[] = {{"num_hidden_layers", "65536"}, {"vocab_size", "16777216"}};
    for (const auto& c : cases) {
        CAPTURE(c.key);
        const std::string dir = d + "/hf_" + c.key;
        fs::create_directories(dir);
        std::string cfg = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 32,
  "intermediate_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
  "num_hidden_layers": 1, "vocab_size": 64, "max_position_embeddings": 16,
  "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})";
        const std::string k = std::string("\"") + c.key + "\": ";
        const size_t at = cfg.find(k) + k.size();
        cfg.replace(at, cfg.find(',', at) - at, "2147483647");
        write_text(dir + "/config.json", cfg);
        RunResult r = run_command("ulimit -t 60; " + program() +
                                      " train "
                                      "deck.yaml --set model.init_from=hf_" +
                                      std::string(c.key),
                                  d);
        check_rc(r, 2,
                 {"= 2147483647 exceeds the limit of " + std::string(c.bound),
                  "config.json key '" + std::string(c.key) + "'"});
    }
}

TEST_CASE("unusable paths and special deck files fail early with the right exit code") {
    std::string d = scratch_dir("survive_paths");
    write_text(d + "/deck.yaml", kDeck);
    write_text(d + "/afile", "x");
    check_rc(run_superoffload("train deck.yaml --set runtime.out_dir=afile", d), 3,
             {"--set runtime.out_dir=afile: runtime.out_dir: 'afile' exists and is not a "
              "directory"});
    check_rc(run_superoffload("check deck.yaml --set train.checkpoint_dir=afile/ck", d), 3,
             {"train.checkpoint_dir", "not a directory"});
    check_rc(run_superoffload("check deck.yaml --set runtime.threads=100000", d), 2,
             {"runtime.threads = 100000 is out of range"});
    check_rc(run_superoffload("check deck.yaml --set device.memory_gb=1e30", d), 2,
             {"device.memory_gb = 1e30 is out of range"});
    REQUIRE(::mkfifo((d + "/fifo.yaml").c_str(), 0644) == 0);
    // today the program blocks forever opening a FIFO (ctest's timeout would end it)
    RunResult r = run_superoffload("check fifo.yaml", d);
    check_rc(r, 3, {"fifo.yaml", "not a regular file"});
    check_rc(run_superoffload("check /dev/zero", d), 3, {"/dev/zero", "not a regular file"});
    // FIFOs where the run writes its outputs: refused with exit 3, never written into (the
    // metrics went into the pipe and were lost with exit 0 before; the effective deck's rename
    // replaced the FIFO)
    for (const char* name : {"metrics.jsonl", "effective_deck.yaml"}) {
        const std::string out = std::string("fifo_out_") + (name[0] == 'm' ? "m" : "e");
        fs::create_directories(d + "/" + out);
        REQUIRE(::mkfifo((d + "/" + out + "/" + name).c_str(), 0644) == 0);
        check_rc(run_superoffload("train deck.yaml --set train.steps=1 --set train.checkpoint_dir= "
                                  "--set runtime.out_dir=" +
                                      out,
                                  d),
                 3, {out + "/" + name, "is a FIFO (not a regular file)"});
        CHECK(fs::is_fifo(d + "/" + out + "/" + name));
    }
}

TEST_CASE("control bytes of a garbage deck are escaped in the message") {
    std::string d = scratch_dir("survive_garbage");
    write_text(d + "/g.yaml", "train:\n  \x1b[2Jx\x07\xff\xc2\x9b\xc3\xa9: 1\n");
    RunResult r = run_superoffload("check g.yaml", d);
    // ESC and BEL (C0), a byte that is not UTF-8, CSI (C1, U+009B) escaped; "\xc3\xa9" (e-acute)
    // is text and stays
    check_rc(r, 2, {"unknown key 'train.\\x1b[2Jx\\x07\\xff\\xc2\\x9b\xc3\xa9'"});
    CHECK_FALSE(has(r.output, "\x1b"));
    CHECK_FALSE(has(r.output, "\x07"));
    CHECK_FALSE(has(r.output, "\xff"));
}

TEST_CASE("export refuses to write into the checkpoint it reads") {
    std::string d = scratch_dir("survive_export");
    write_text(d + "/deck.yaml", kDeck);
    check_rc(run_superoffload("train deck.yaml --set train.steps=2", d), 0, {});
    const std::string params = d + "/ckpt/step_00000002/params.bin";
    const std::string before = slurp(params);
    check_rc(run_superoffload("export --llmc ckpt/step_00000002/params.bin ckpt", d), 2,
             {"lies inside the checkpoint", "choose a path outside it"});
    check_rc(run_superoffload("export --llmc ckpt/step_00000002/x.bin ckpt/step_00000002", d), 2,
             {"lies inside the checkpoint"});
    CHECK(slurp(params) == before);
    CHECK_FALSE(fs::exists(d + "/ckpt/step_00000002/x.bin"));
    REQUIRE(::mkfifo((d + "/fifo.bin").c_str(), 0644) == 0);
    check_rc(run_superoffload("export --llmc fifo.bin ckpt", d), 3,
             {"fifo.bin", "it exists and is a FIFO (not a regular file)"});
    CHECK(fs::is_fifo(d + "/fifo.bin"));
    check_rc(run_superoffload("export --llmc model.bin ckpt", d), 0, {"exported"});
    // the checkpoint still resumes
    check_rc(run_superoffload("train deck.yaml --set train.steps=3 --set train.resume=auto", d), 0,
             {"resume: ckpt/step_00000002"});
}

TEST_CASE("resume refuses a different run and names each difference; lr changes are logged") {
    std::string d = scratch_dir("survive_compat");
    write_text(d + "/deck.yaml", kDeck);
    check_rc(run_superoffload("train deck.yaml --set train.steps=2", d), 0, {});
    // same parameter count, other heads; another corpus of the same size
    check_rc(run_superoffload("train deck.yaml --set train.steps=4 --set train.resume=auto "
                              "--set model.num_heads=4 --set data.builtin.seed=7",
                              d),
             2,
             {"cannot resume from ckpt/step_00000002", "model.num_heads: checkpoint 2, this run 4",
              "data.builtin.seed: checkpoint 1234, this run 7"});
    check_rc(
        run_superoffload(
            "train deck.yaml --set train.steps=4 --set train.resume=auto --set train.lr=1e-3", d),
        0, {"resume: train.lr changed: 0.003 -> 0.001"});

    // a Llama with llama3 rope scaling: a change of any rope_scaling key is refused, naming it
    // (before, only the factor was compared: the other three were silently accepted)
    const std::string llama = " --set model.type=llama --set model.intermediate_size=64 "
                              "--set model.rope_scaling.type=llama3 --set train.checkpoint_dir=lck "
                              "--set runtime.out_dir=lout";
    check_rc(run_superoffload("train deck.yaml --set train.steps=1" + llama, d), 0, {});
    const struct {
        const char* key;
        const char* value;
        const char* saved;
    } rope[] = {{"factor", "4", "8"},
                {"low_freq_factor", "2", "1"},
                {"high_freq_factor", "3", "4"},
                {"original_max_position_embeddings", "4096", "8192"}};
    for (const auto& r : rope) {
        CAPTURE(r.key);
        const std::string key = std::string("model.rope_scaling.") + r.key;
        check_rc(run_superoffload("train deck.yaml --set train.steps=2 --set train.resume=auto" +
                                      llama + " --set " + key + "=" + r.value,
                                  d),
                 2,
                 {"cannot resume from lck/step_00000001",
                  key + ": checkpoint " + r.saved + ", this run " + r.value});
    }
}

TEST_CASE("leftovers of a killed save are cleaned when a run starts") {
    std::string d = scratch_dir("survive_stale");
    write_text(d + "/deck.yaml", kDeck);
    fs::create_directories(d + "/ckpt/.tmp-step_00000099");
    write_text(d + "/ckpt/.tmp-step_00000099/params.bin", "partial");
    check_rc(run_superoffload("train deck.yaml --set train.steps=1", d), 0,
             {"checkpoint: removed ckpt/.tmp-step_00000099 (left by an interrupted save)"});
    CHECK_FALSE(fs::exists(d + "/ckpt/.tmp-step_00000099"));
}
