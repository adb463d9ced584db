// Deck checks that touch the file system (data globs, what a non-regular data file is, init_from,
// resume, plugin_dir, hardware, path lengths, the deck file itself), what train refuses refused
// here first, docs/deck.md covering every key, and every deck in inputs/ validating.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "deck_test_util.h"

namespace fs = std::filesystem;
using namespace sof;
using namespace sof::config;
using sof::test::contains;
using sof::test::deck_error;

TEST_CASE("data globs must match at least one file") {
    std::string d = test::scratch("globs");
    std::string m = deck_error("data:\n  train: " + d + "/shards/*.bin\n");
    CHECK(contains(m, "deck.yaml:2: data.train: no file matches '" + d + "/shards/*.bin'"));
    m = deck_error("data:\n  val: shards/*.bin\n");
    CHECK(contains(m, "deck.yaml:2: data.val: no file matches 'shards/*.bin' (looked in "));
    CHECK(contains(deck_error("data:\n  train: \"\"\n"), "deck.yaml:2: data.train is empty"));
    // a directory that matches is not a shard
    fs::create_directories(d + "/shards/dir.bin");
    CHECK(contains(deck_error("data:\n  train: " + d + "/shards/*.bin\n"), "no file matches"));
    test::write_file(d + "/shards/a_000.bin", "x");
    test::write_file(d + "/shards/a_001.bin", "x");
    Config c = load_deck_from_string("data:\n  train: " + d + "/shards/a_*.bin\n  val: " + d +
                                         "/shards/a_001.bin\n",
                                     "ok.yaml", {});
    CHECK(c.data.train == d + "/shards/a_*.bin");
    // relative patterns resolve against the current directory
    fs::path old = fs::current_path();
    fs::current_path(d);
    CHECK_NOTHROW(load_deck_from_string("data:\n  train: shards/a_*.bin\n", "rel.yaml", {}));
    fs::current_path(old);
}

TEST_CASE("init_from, resume, plugin_dir and hardware must exist") {
    std::string d = test::scratch("paths");
    CHECK(contains(deck_error("", {"model.init_from=" + d + "/nope.bin"}),
                   "--set model.init_from=" + d + "/nope.bin: model.init_from: '" + d +
                       "/nope.bin' is neither a file nor a Hugging Face model directory"));
    CHECK(contains(deck_error("train:\n  resume: nowhere/step_00000001\n"),
                   "deck.yaml:2: train.resume: checkpoint directory 'nowhere/step_00000001' does "
                   "not exist"));
    CHECK(contains(deck_error("optimizer:\n  plugin_dir: " + d + "/plugins\n"),
                   "deck.yaml:2: optimizer.plugin_dir: directory '" + d +
                       "/plugins' does not "
                       "exist"));
    CHECK(contains(deck_error("offload:\n  hardware: " + d + "/gh200.yaml\n"),
                   "deck.yaml:2: offload.hardware: file '" + d + "/gh200.yaml' does not exist"));
    test::write_file(d + "/m.bin", "x");
    fs::create_directories(d + "/ck/step_00000002");
    // a directory without a manifest is not a checkpoint: refused here, not when train loads it
    CHECK(contains(deck_error("", {"train.resume=" + d + "/ck/step_00000002"}),
                   "train.resume: '" + d +
                       "/ck/step_00000002' is not a checkpoint (no "
                       "manifest.json in it)"));
    test::write_file(d + "/ck/step_00000002/manifest.json", "{}");
    fs::create_directories(d + "/plugins");
    test::write_file(d + "/gh200.yaml", "gpu: {}\n");
    // with init_from the checkpoint decides the architecture: deck shape checks are skipped
    Config c = load_deck_from_string(
        "model:\n  max_seq_len: 8\ntrain:\n  seq_len: 64\n", "i.yaml",
        {"model.init_from=" + d + "/m.bin", "train.resume=" + d + "/ck/step_00000002",
         "optimizer.plugin_dir=" + d + "/plugins", "offload.hardware=" + d + "/gh200.yaml"});
    CHECK(c.model.init_from == d + "/m.bin");
    CHECK(c.train.resume == d + "/ck/step_00000002");
    // resume: auto needs a checkpoint_dir, which need not exist yet
    CHECK_NOTHROW(load_deck_from_string(
        "", "a.yaml", {"train.resume=auto", "train.checkpoint_dir=" + d + "/not-yet"}));
}

namespace {

// The error (kind and message) loading `yaml` throws, or kind Internal and "" when it loads.
std::pair<core::ErrorKind, std::string> load_error(const std::string& yaml,
                                                   const std::vector<std::string>& ov = {}) {
    try {
        load_deck_from_string(yaml, "deck.yaml", ov);
    } catch (const core::Error& e) {
        return {e.kind(), e.what()};
    }
    return {core::ErrorKind::Internal, ""};
}

} // namespace

TEST_CASE("data.train that exists but is not a regular file says what it is") {
    std::string d = test::scratch("special_data");
    REQUIRE(::mkfifo((d + "/fifo.bin").c_str(), 0644) == 0);
    fs::create_symlink("/dev/zero", d + "/zero.bin");
    fs::create_symlink(d + "/nowhere.bin", d + "/broken.bin");
    // before: "no file matches" (the glob matched, but only regular files were counted)
    auto [k, m] = load_error("data:\n  train: " + d + "/fifo.bin\n");
    CHECK(k == core::ErrorKind::Io);
    CHECK(contains(m, "deck.yaml:2: data.train: '" + d +
                          "/fifo.bin' is a FIFO, not a regular "
                          "file"));
    std::tie(k, m) = load_error("data:\n  val: " + d + "/zero.bin\n");
    CHECK(k == core::ErrorKind::Io);
    CHECK(contains(m, "deck.yaml:2: data.val: '" + d +
                          "/zero.bin' is a symbolic link to "
                          "'/dev/zero', a character device, not a regular file"));
    std::tie(k, m) = load_error("data:\n  train: " + d + "/broken.bin\n");
    CHECK(contains(m, "is a broken symbolic link to '" + d + "/nowhere.bin'"));
    // among regular shards, matched by a glob: named, with the glob
    test::write_file(d + "/a.bin", "x");
    std::tie(k, m) = load_error("data:\n  train: " + d + "/*.bin\n");
    CHECK(k == core::ErrorKind::Io);
    CHECK(contains(m, "(matched by '" + d + "/*.bin')"));
    // a Megatron-LM dataset by its prefix: both files must be there
    test::write_file(d + "/m_text_document.bin", "x");
    CHECK(contains(load_error("data:\n  train: " + d + "/m_text_document\n").second,
                   "'" + d + "/m_text_document.bin' exists but '" + d +
                       "/m_text_document.idx' does not"));
    test::write_file(d + "/m_text_document.idx", "x");
    CHECK(load_error("data:\n  train: " + d + "/m_text_document\n").second.empty());
}

TEST_CASE("what train refuses about a deck, load_deck (check) refuses first with file:line") {
    std::string d = test::scratch("train_refuses");
    // each of these passed `check` and failed only in `train`
    const std::string long_dir = d + "/" + [] {
        std::string s;
        for (int i = 0; i < 3000; i++)
            s += "d/";
        return s;
    }();
    struct Case {
        std::string yaml, says;
    };
    const std::vector<Case> cases = {
        {"optimizer:\n  plugin: -1e-9\n",
         "deck.yaml:2: optimizer.plugin = '-1e-9' is not a plugin name"},
        {"train:\n  checkpoint_dir: " + long_dir + "\n",
         "deck.yaml:2: train.checkpoint_dir: the path cannot be used: it has"},
        {"runtime:\n  out_dir: " + d + "/" + std::string(300, 'x') + "/run\n",
         "deck.yaml:2: runtime.out_dir: the path cannot be used: its component 'xxxx"},
        {"train:\n  metrics: " + long_dir + "m.jsonl\n", "deck.yaml:2: train.metrics: the path"},
        {"data:\n  pack: true\n", "deck.yaml:2: data.pack = true needs the token that ends a "
                                  "document"},
        {"model:\n  vocab_size: 64\ndata:\n  pack: true\n  eos_id: 64\n",
         "deck.yaml:5: data.eos_id = 64 is not a token id of the vocabulary (0..63"},
        {"train:\n  global_batch: 100000\n  seq_len: 64\n",
         "deck.yaml:2: data.builtin.train_tokens = 2097152 is less than one step "
         "(train.global_batch * train.seq_len + 1 = 6400001)"},
        {"runtime:\n  trace: /dev/null\n",
         "deck.yaml:2: runtime.trace: '/dev/null' is a character device, not a regular file"},
    };
    for (const Case& c : cases) {
        INFO(c.yaml.substr(0, 200));
        const auto [k, m] = load_error(c.yaml);
        INFO(m.substr(0, 400));
        CHECK(contains(m, c.says));
    }
    // what stays accepted: metrics to /dev/null, pack with an id in range, global_batch that fits
    CHECK(load_error("train:\n  metrics: /dev/null\n").second.empty());
    CHECK(load_error("data:\n  pack: true\n  eos_id: 3\n").second.empty());
    CHECK(load_error("train:\n  global_batch: 16\n  seq_len: 64\n").second.empty());
    CHECK(load_error("optimizer:\n  plugin: cpu_adam\n").second.empty());
}

TEST_CASE("load_deck: unreadable deck files are Io errors, the rest Config errors") {
    std::string d = test::scratch("files");
    try {
        load_deck(d + "/missing.yaml", {});
        FAIL("expected an error");
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Io);
        CHECK(contains(e.what(), "cannot read deck '" + d + "/missing.yaml': no such file"));
    }
    try {
        load_deck(d, {});
        FAIL("expected an error");
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Io);
        CHECK(contains(e.what(), "is a directory"));
    }
    test::write_file(d + "/typo.yaml", "train:\n  steps: 3\n  lrr: 0.1\n");
    try {
        load_deck(d + "/typo.yaml", {});
        FAIL("expected an error");
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        CHECK(std::string(e.what()) ==
              d + "/typo.yaml:3: unknown key 'train.lrr' (did you mean 'train.lr'?)");
    }
    test::write_file(d + "/ok.yaml", "train:\n  steps: 3\n");
    Config c = load_deck(d + "/ok.yaml", {"train.lr=0.5"});
    CHECK(c.deck_path == d + "/ok.yaml");
    CHECK(c.train.steps == 3);
    CHECK(c.train.lr == 0.5f);
}

TEST_CASE("docs/deck.md documents every key") {
    std::ifstream f(std::string(SOF_SOURCE_DIR) + "/docs/deck.md");
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string doc = ss.str();
    for (const std::string& k : all_keys())
        CHECK_MESSAGE(contains(doc, "| `" + k + "` |"), "docs/deck.md has no table row for " << k);
}

TEST_CASE("every deck under inputs/ and inputs/bench/ validates") {
    int n = 0;
    std::vector<fs::directory_entry> decks;
    for (const char* sub : {"inputs", "inputs/bench"})
        for (const auto& e : fs::directory_iterator(fs::path(SOF_SOURCE_DIR) / sub))
            decks.push_back(e);
    for (const auto& e : decks) {
        if (e.path().extension() != ".yaml") continue;
        INFO(e.path().string());
        Config c;
        // decks of published models from their config.json (phi4-gh200.yaml, ...) name it
        // relative to the repository root, where they are run from
        const Config raw = parse_deck_text(read_yaml_file(e.path().string(), "deck"), "raw");
        std::vector<std::string> init;
        if (raw.model.init_from.rfind("inputs/", 0) == 0)
            init.push_back("model.init_from=" + std::string(SOF_SOURCE_DIR) + "/" +
                           raw.model.init_from);
        try {
            c = load_deck(e.path().string(), init);
        } catch (const core::Error& err) {
            // decks of published models (llama3-8b-gh200.yaml, ...) read the user's token shards:
            // the missing shards must be their only complaint, and with stand-in files they load
            std::string m = err.what();
            INFO(m);
            CHECK(contains(m, "no file matches"));
            std::string d = test::scratch("deck-shards");
            std::vector<std::string> sets = init;
            for (const auto& [key, pat] :
                 {std::pair<std::string, std::string>{"data.train", raw.data.train},
                  {"data.val", raw.data.val}}) {
                if (pat == "builtin") continue;
                std::string f = d + "/" + e.path().stem().string() + "_" + key + ".bin";
                test::write_file(f, "x");
                sets.push_back(key + "=" + f);
            }
            CHECK_NOTHROW(c = load_deck(e.path().string(), sets));
        }
        // and its effective deck reads back unchanged
        CHECK(effective_yaml(load_deck_from_string(effective_yaml(c), "echo", {})) ==
              effective_yaml(c));
        n++;
    }
    CHECK(n >= 4);
}
