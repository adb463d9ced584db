// End-to-end tests of the program: bad decks, bad shards and bad checkpoints each give one clear
// message and a non-zero exit (never a crash); a tiny run trains, checkpoints, exports, re-imports.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "e2e/cli.h"

using namespace sof::test;
namespace fs = std::filesystem;

namespace {

const char* kSmallDeck = R"(model:
  num_layers: 1
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
  steps: 3
  eval_batches: 1
runtime:
  out_dir: out
  threads: 1
)";

void expect_clean_failure(const RunResult& r, int code, const std::vector<std::string>& needles) {
    INFO("output:\n" << r.output);
    CHECK_FALSE(r.signaled);
    CHECK(r.exit_code == code);
    for (const auto& n : needles)
        CHECK(r.output.find(n) != std::string::npos);
    // one clear message, no abort trace
    CHECK(r.output.find("terminate called") == std::string::npos);
    CHECK(r.output.find("MPI_ABORT") == std::string::npos);
}

void write_shard(const std::string& path, int32_t magic, int32_t version, int32_t count_in_header,
                 const std::vector<uint16_t>& tokens) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count_in_header;
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
}

std::vector<uint16_t> some_tokens(size_t n, int vocab) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++)
        t[i] = static_cast<uint16_t>((i * 7 + 3) % vocab);
    return t;
}

} // namespace

TEST_CASE("unknown command and missing deck are usage errors") {
    std::string d = scratch_dir("cli_usage");
    expect_clean_failure(run_superoffload("frobnicate", d), 2, {"unknown command 'frobnicate'"});
    RunResult r = run_superoffload("train", d);
    CHECK_FALSE(r.signaled);
    CHECK(r.exit_code == 2);
}

TEST_CASE("deck errors name file, line and key") {
    std::string d = scratch_dir("cli_deck");
    write_text(d + "/typo.yaml", "train:\n  steps: 3\n  lrr: 0.1\n");
    expect_clean_failure(run_superoffload("check typo.yaml", d), 2,
                         {"typo.yaml:3", "lrr", "train.lr"});

    write_text(d + "/type.yaml", "train:\n  batch_size: four\n");
    expect_clean_failure(run_superoffload("check type.yaml", d), 2,
                         {"type.yaml:2", "train.batch_size"});

    write_text(d + "/range.yaml", "optimizer:\n  beta1: 1.5\n");
    expect_clean_failure(run_superoffload("check range.yaml", d), 2,
                         {"range.yaml:2", "optimizer.beta1"});

    write_text(d + "/syntax.yaml", "train:\n  steps: [1, 2\n");
    expect_clean_failure(run_superoffload("check syntax.yaml", d), 2, {"syntax.yaml"});

    expect_clean_failure(run_superoffload("check missing.yaml", d), 3, {"missing.yaml"});

    write_text(d + "/ok.yaml", kSmallDeck);
    expect_clean_failure(run_superoffload("train ok.yaml --set train.steps=abc", d), 2,
                         {"train.steps"});
    expect_clean_failure(run_superoffload("train ok.yaml --set train.nope=1", d), 2,
                         {"train.nope"});
}

TEST_CASE("missing files referenced by a deck") {
    std::string d = scratch_dir("cli_missing");
    write_text(d + "/a.yaml", kSmallDeck);
    RunResult r = run_superoffload("train a.yaml --set train.resume=nowhere/step_00000001", d);
    INFO(r.output);
    CHECK_FALSE(r.signaled);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("nowhere") != std::string::npos);

    std::string deck = kSmallDeck;
    deck.replace(deck.find("  train: builtin"), 16, "  train: shards/*.bin");
    write_text(d + "/b.yaml", deck);
    expect_clean_failure(run_superoffload("train b.yaml", d), 2, {"shards/*.bin"});

    r = run_superoffload("train a.yaml --set model.init_from=nope.bin", d);
    CHECK_FALSE(r.signaled);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("nope.bin") != std::string::npos);
}

TEST_CASE("bad token shards are rejected with the reason") {
    std::string d = scratch_dir("cli_shards");
    std::string deck = kSmallDeck;
    deck.replace(deck.find("  train: builtin"), 16, "  train: bad.bin");
    write_text(d + "/deck.yaml", deck);

    write_shard(d + "/bad.bin", 12345, 1, 4096, some_tokens(4096, 64));
    expect_clean_failure(run_superoffload("train deck.yaml", d), 4, {"bad.bin", "magic"});

    write_shard(d + "/bad.bin", 20240520, 7, 4096, some_tokens(4096, 64));
    expect_clean_failure(run_superoffload("train deck.yaml", d), 4, {"bad.bin", "version"});

    write_shard(d + "/bad.bin", 20240520, 1, 4096, some_tokens(1000, 64)); // truncated
    expect_clean_failure(run_superoffload("train deck.yaml", d), 4, {"bad.bin"});

    write_shard(d + "/bad.bin", 20240520, 1, 4096, some_tokens(4096, 200)); // tokens >= vocab
    expect_clean_failure(run_superoffload("train deck.yaml", d), 4, {"bad.bin", "vocab"});
}

TEST_CASE("train, checkpoint, export to llm.c, re-import, corrupt checkpoint") {
    std::string d = scratch_dir("cli_roundtrip");
    write_text(d + "/deck.yaml", kSmallDeck);
    const std::string ck = " --set train.checkpoint_dir=ckpt --set train.checkpoint_every=2";
    RunResult r = run_superoffload("train deck.yaml" + ck, d);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("val loss") != std::string::npos);
    CHECK(fs::exists(d + "/out/metrics.jsonl"));

    r = run_superoffload("export --llmc model.bin ckpt", d);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE(fs::exists(d + "/model.bin"));

    r = run_superoffload("train deck.yaml --set train.steps=1 --set model.init_from=model.bin", d);
    INFO(r.output);
    CHECK(r.exit_code == 0);

    // corrupt one byte of a checkpoint shard: resume must refuse it
    std::string step_dir;
    for (auto& e : fs::directory_iterator(d + "/ckpt"))
        if (e.path().filename().string().rfind("step_", 0) == 0) step_dir = e.path().string();
    REQUIRE(!step_dir.empty());
    std::string shard;
    for (auto& e : fs::directory_iterator(step_dir))
        if (e.path().extension() == ".bin") shard = e.path().string();
    REQUIRE(!shard.empty());
    {
        std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(2000);
        char c = 0x55;
        f.write(&c, 1);
    }
    r = run_superoffload(
        "train deck.yaml" + ck + " --set train.steps=4 --set train.resume=" + step_dir, d);
    INFO(r.output);
    CHECK_FALSE(r.signaled);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(fs::path(shard).filename().string()) != std::string::npos);

    // a file that is not an llm.c checkpoint
    write_shard(d + "/notllmc.bin", 20240520, 1, 100, some_tokens(100, 64));
    expect_clean_failure(run_superoffload("train deck.yaml --set model.init_from=notllmc.bin", d),
                         4, {"notllmc.bin"});
}

TEST_CASE("a run whose every step is skipped exits non-zero; a run with one skip exits 0") {
    std::string d = scratch_dir("cli_all_skipped");
    write_text(d + "/deck.yaml", kSmallDeck);
    // before: "skips 3" in the last line and exit 0, as if the run had trained
    expect_clean_failure(
        run_superoffload("train deck.yaml --set 'debug.inject_nonfinite_steps=[0,1,2]'", d), 1,
        {"commits 0, skips 3", "every step of this run was skipped"});
    RunResult r = run_superoffload("train deck.yaml --set 'debug.inject_nonfinite_steps=[1]'", d);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("commits 2, skips 1") != std::string::npos);
}

TEST_CASE("the effective deck goes to the run directory; the log prints it only with -v") {
    std::string d = scratch_dir("cli_effective_deck");
    write_text(d + "/deck.yaml", kSmallDeck);
    // before: about 100 lines of deck at the start of every run, no file
    RunResult r = run_superoffload("train deck.yaml --set train.steps=1", d);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("effective deck: out/effective_deck.yaml") != std::string::npos);
    CHECK(r.output.find("optimizer:\n") == std::string::npos);
    std::ifstream f(d + "/out/effective_deck.yaml");
    std::string deck((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(deck.find("  steps: 1\n") != std::string::npos);
    CHECK(deck.find("optimizer:\n") != std::string::npos);
    RunResult v = run_superoffload("train deck.yaml --set train.steps=1 -v", d);
    INFO(v.output);
    REQUIRE(v.exit_code == 0);
    CHECK(v.output.find("optimizer:\n") != std::string::npos);
}

TEST_CASE("a named optimizer plugin that does not exist") {
    std::string d = scratch_dir("cli_plugin");
    write_text(d + "/deck.yaml", kSmallDeck);
    RunResult r = run_superoffload("train deck.yaml --set optimizer.plugin=warp_adam", d);
    INFO(r.output);
    CHECK_FALSE(r.signaled);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("warp_adam") != std::string::npos);
    // lists what was found: the host plugin this build makes (SOF_HOST_PLUGIN)
    CHECK(r.output.find(std::string("found: ") + SOF_HOST_PLUGIN) != std::string::npos);
}

TEST_CASE("what train refuses about a deck, check refuses first: same exit code, deck file:line") {
    std::string d = scratch_dir("cli_check_first");
    write_text(d + "/deck.yaml", kSmallDeck);
    write_text(d + "/bad_hw.yaml", "cpu:\n  bogus: 1\n");
    fs::create_directories(d + "/not_a_checkpoint");
    REQUIRE(::mkfifo((d + "/fifo.bin").c_str(), 0644) == 0);
    fs::create_symlink("/dev/zero", d + "/zero.bin");
    std::string long_dir;
    for (int i = 0; i < 3000; i++)
        long_dir += "d/";
    struct Case {
        std::string set;   // --set overrides
        int code;          // what both exit with
        std::string where; // the deck line or --set the message names
        std::string says;
    };
    // each of these passed `check`; train then refused it (rc 2 or 3), without the deck's line
    const std::vector<Case> cases = {
        {"optimizer.plugin=-1e-9", 2,
         "--set optimizer.plugin=-1e-9: ", "optimizer.plugin = '-1e-9' is not a plugin name"},
        {"optimizer.plugin=warp_adam", 2,
         "--set optimizer.plugin=warp_adam: ", "optimizer.plugin 'warp_adam' not found in"},
        {"optimizer.plugin_dir=.", 2, "--set optimizer.plugin_dir=.: ",
         "optimizer.plugin 'auto': no host-target plugin in . can run"},
        {"train.checkpoint_dir=" + long_dir, 2, "--set train.checkpoint_dir=d/d/",
         "train.checkpoint_dir: the path cannot be used: it has 6000 characters"},
        {"runtime.out_dir=" + std::string(300, 'o'), 2, "--set runtime.out_dir=ooo", "NAME_MAX"},
        {"data.pack=true", 2,
         "--set data.pack=true: ", "data.pack = true needs the token that ends a document"},
        {"data.pack=true --set data.eos_id=64", 2,
         "--set data.eos_id=64: ", "data.eos_id = 64 is not a token id"},
        {"train.global_batch=1000", 2,
         "deck.yaml:11: ", "data.builtin.train_tokens = 8192 is less than one step"},
        {"train.resume=not_a_checkpoint", 2,
         "--set train.resume=not_a_checkpoint: ", "is not a checkpoint (no manifest.json in it)"},
        {"runtime.trace=/dev/null", 3, "--set runtime.trace=/dev/null: ",
         "'/dev/null' is a character device, not a regular file"},
        {"offload.enabled=true --set offload.hardware=bad_hw.yaml", 2,
         "--set offload.hardware=bad_hw.yaml: ", "offload.hardware: bad_hw.yaml:1: missing key"},
        {"data.train=fifo.bin", 3,
         "--set data.train=fifo.bin: ", "'fifo.bin' is a FIFO, not a regular file"},
        {"data.val=zero.bin", 3, "--set data.val=zero.bin: ",
         "'zero.bin' is a symbolic link to '/dev/zero', a character device, not a regular file"},
    };
    for (const Case& c : cases) {
        INFO(c.set.substr(0, 120));
        for (const char* cmd : {"check", "train"}) {
            const RunResult r = run_superoffload(std::string(cmd) + " deck.yaml --set " + c.set, d);
            INFO(cmd << ": " << r.output.substr(0, 600));
            expect_clean_failure(r, c.code, {c.where, c.says});
        }
    }
    // in a deck file the message names its line
    std::string deck = kSmallDeck;
    deck += "optimizer:\n  plugin: warp_adam\n";
    write_text(d + "/plugin.yaml", deck);
    for (const char* cmd : {"check", "train"})
        expect_clean_failure(run_superoffload(std::string(cmd) + " plugin.yaml", d), 2,
                             {"plugin.yaml:22: optimizer.plugin 'warp_adam' not found in"});
    // device.type cuda: in a build without CUDA both refuse it alike; with CUDA, train may
    // still fail for want of a GPU (the machine, not the deck), so only the refusal is compared
    const RunResult t = run_superoffload("train deck.yaml --set device.type=cuda", d);
    if (t.output.find("this build has no CUDA support") != std::string::npos)
        expect_clean_failure(run_superoffload("check deck.yaml --set device.type=cuda", d), 2,
                             {"--set device.type=cuda: device.type: cuda, but this build has no "
                              "CUDA support"});
}

TEST_CASE("check reads model.init_from's config.json as train does (issue 26)") {
    // no weights needed: inputs/hf/qwen3-14b holds config.json only. The deck's own model (1
    // layer, 16 positions) must not be what check validates against.
    const std::string d = scratch_dir("cli_check_init_from");
    write_text(d + "/deck.yaml", kSmallDeck);
    const std::string hf = std::string(SOF_SOURCE_DIR) + "/inputs/hf/qwen3-14b";
    RunResult r = run_superoffload(
        "check deck.yaml --set model.init_from=" + hf + " --set train.seq_len=32", d);
    INFO(r.output.substr(0, 800));
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("# model: " + hf + "/config.json") != std::string::npos);
    CHECK(r.output.find("num_layers: 40") != std::string::npos);
    // the config's max_position_embeddings (40960), not the deck's max_seq_len, bounds seq_len
    r = run_superoffload("check deck.yaml --set model.init_from=" + hf +
                             " --set train.seq_len=65536 --set train.batch_size=1"
                             " --set data.builtin.train_tokens=1000000"
                             " --set data.builtin.val_tokens=1000000",
                         d);
    expect_clean_failure(r, 2, {"train.seq_len = 65536 exceeds the model's max_seq_len = 40960"});
    // the deck alone: its own model
    r = run_superoffload("check deck.yaml", d);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("num_layers: 1\n") != std::string::npos);
}

TEST_CASE("a LLaMA-family model trains end to end; bench model runs and names bad options") {
    std::string d = scratch_dir("cli_llama");
    write_text(d + "/deck.yaml", kSmallDeck);
    RunResult r = run_superoffload(
        "train deck.yaml --set model.type=qwen3 --set model.num_kv_heads=1 "
        "--set model.intermediate_size=80 --set model.tie_embeddings=false --set train.steps=6",
        d);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("model: qwen3") != std::string::npos);
    CHECK(r.output.find("untied head") != std::string::npos);
    // missing intermediate_size: a config error naming the key
    expect_clean_failure(run_superoffload("check deck.yaml --set model.type=llama", d), 2,
                         {"model.intermediate_size"});
    r = run_superoffload("bench model --channels 48 --heads 4 --kv-heads 2 --seq 8 --batch 1 "
                         "--layers 1 --pairs 1 --json",
                         d);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("\"time_per_flop_ratio\"") != std::string::npos);
    CHECK(r.output.find("\"NKV\": 2") != std::string::npos);
    expect_clean_failure(run_superoffload("bench model --arch gpt2", d), 2, {"--arch 'gpt2'"});
    expect_clean_failure(run_superoffload("bench model --seq x", d), 2, {"--seq 'x'"});
}

TEST_CASE(
    "bench train: --variants picks the runs, --hardware the profile; a bad variant is named") {
    std::string d = scratch_dir("cli_bench_train");
    write_text(d + "/deck.yaml", kSmallDeck);
    const std::string hw = std::string(SOF_SOURCE_DIR) + "/inputs/hardware/h100-sxm.yaml";
    RunResult r = run_superoffload(
        "bench train deck.yaml --steps 3 --variants no-offload,deck --hardware " + hw, d);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("hardware profile h100-sxm (peak 989.0 TFLOPS)") != std::string::npos);
    // both asked for, in the fixed order, and the line that compares them; not the exposed run
    const size_t deck = r.output.find("offload (deck)"), none = r.output.find("no offload (state");
    CHECK(deck != std::string::npos);
    CHECK(none != std::string::npos);
    CHECK(deck < none);
    CHECK(r.output.find("offload / no offload iteration time") != std::string::npos);
    CHECK(r.output.find("CPU step exposed") == std::string::npos);
    CHECK(r.output.find("hidden behind compute") == std::string::npos);
    expect_clean_failure(run_superoffload("bench train deck.yaml --variants deck,fast", d), 2,
                         {"--variants deck,fast", "'fast'"});
}

TEST_CASE("every bench subcommand refuses a bad option with exit 2 and its usage (CLI11)") {
    std::string d = scratch_dir("cli_bench_args");
    write_text(d + "/deck.yaml", kSmallDeck);
    expect_clean_failure(run_superoffload("bench", d), 2, {"bench: name a benchmark", "adam"});
    expect_clean_failure(run_superoffload("bench nosuch", d), 2,
                         {"bench: unknown benchmark 'nosuch'"});
    expect_clean_failure(
        run_superoffload("bench adam --params 1K --bogus", d), 2,
        {"bench adam: unknown argument '--bogus'", "usage: superoffload bench adam [--params N"});
    expect_clean_failure(run_superoffload("bench adam --params", d), 2,
                         {"bench adam: --params needs a value"});
    expect_clean_failure(
        run_superoffload("bench model --bogus 3", d), 2,
        {"bench model: unknown option '--bogus'", "usage: superoffload bench model"});
    expect_clean_failure(run_superoffload("bench model --seq", d), 2,
                         {"bench model: --seq needs a value"});
    expect_clean_failure(
        run_superoffload("bench attention --bogus 1", d), 2,
        {"bench attention: unknown option '--bogus'", "usage: superoffload bench attention"});
    expect_clean_failure(run_superoffload("bench attention --seq -5", d), 2,
                         {"bench attention: --seq '-5' must be an integer in [0, 10000000]"});
    expect_clean_failure(run_superoffload("bench attention --heads 0", d), 2,
                         {"--channels 256 is not a multiple of --heads 0"});
    expect_clean_failure(run_superoffload("bench import --bogus x", d), 2,
                         {"bench import: unknown option '--bogus'",
                          "usage: superoffload bench import --create DIR | DIR [--rounds N]"});
    expect_clean_failure(run_superoffload("bench import", d), 2,
                         {"bench import: give --create DIR or one DIR to import"});
    expect_clean_failure(run_superoffload("bench import hf --rounds 0", d), 2,
                         {"bench import: --rounds '0' must be an integer in [1, 1000]"});
    expect_clean_failure(run_superoffload("bench train deck.yaml --bogus", d), 2,
                         {"superoffload bench train: unknown option '--bogus'"});
}
