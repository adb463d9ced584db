// Checkpoints across killed and refused runs: the manifest layout written before nlohmann-json
// still loads, duplicate keys are refused, a failed save leaves no temporary directory, leftovers
// of killed saves are cleaned (or restored), and a resume compares architecture, data and
// optimizer.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <set>

#include "ckpt/checkpoint.h"
#include "ckpt/compat.h"
#include "ckpt/fileio.h"
#include "ckpt/manifest.h"
#include "ckpt_test_util.h"
#include "config/deck.h"
#include "config/fields.h"
#include "model/model_config.h"

using namespace sof;
using namespace sof::test;
namespace fs = std::filesystem;

namespace {

ckpt::Manifest small_manifest(int64_t step) {
    ckpt::Manifest m;
    m.step = step;
    m.opt_step = step;
    m.model.max_seq_len = 4;
    m.model.vocab_size = 10;
    m.model.padded_vocab_size = 16;
    m.model.num_layers = 2;
    m.model.num_heads = 2;
    m.model.channels = 8;
    m.num_params = static_cast<int64_t>(model::make_layout(m.model).num_params);
    m.deck_yaml = "train:\n  steps: 7\n";
    m.train_data.num_tokens = 1000;
    m.train_data.batch_tokens = 8;
    return m;
}

ckpt::State small_state(const ckpt::Manifest& m) {
    ckpt::State s;
    s.params = pattern(static_cast<size_t>(m.num_params), 1);
    s.exp_avg = pattern(static_cast<size_t>(m.num_params), 2);
    s.exp_avg_sq = pattern(static_cast<size_t>(m.num_params), 3);
    return s;
}

std::string entry(const std::string& dir, const std::string& file) {
    std::string bytes = slurp(dir + "/" + file);
    return core::strfmt(
        "{\"file\": \"%s\", \"bytes\": %zu, \"checksum\": \"%s\"}", file.c_str(), bytes.size(),
        ckpt::checksum_hex(ckpt::block_checksum(bytes.data(), bytes.size())).c_str());
}

// The manifest exactly as the hand-written writer before nlohmann-json laid it out.
std::string old_layout_manifest(const std::string& dir, const ckpt::Manifest& m) {
    std::string s = "{\n";
    s += "  \"format\": \"superoffload-checkpoint\",\n  \"format_version\": 1,\n";
    s += "  \"checksum_algorithm\": \"fnv1a64-blocks-64MiB\",\n";
    s += core::strfmt("  \"step\": %lld,\n  \"opt_step\": %lld,\n", (long long)m.step,
                      (long long)m.opt_step);
    s += core::strfmt("  \"num_params\": %lld,\n  \"world_size\": 1,\n", (long long)m.num_params);
    s += "  \"skips\": 0,\n  \"rollbacks\": 0,\n";
    s += core::strfmt("  \"model\": {\"max_seq_len\": %d, \"vocab_size\": %d, "
                      "\"padded_vocab_size\": %d, \"num_layers\": %d, \"num_heads\": %d, "
                      "\"channels\": %d},\n",
                      m.model.max_seq_len, m.model.vocab_size, m.model.padded_vocab_size,
                      m.model.num_layers, m.model.num_heads, m.model.channels);
    s += "  \"train_data\": \"" + m.train_data.to_string() + "\",\n";
    s += "  \"deck\": " + entry(dir, "deck.yaml") + ",\n";
    s += "  \"shards\": [\n    {\n";
    s += core::strfmt("      \"rank\": 0,\n      \"numel\": %lld,\n", (long long)m.num_params);
    s += "      \"params\": " + entry(dir, "params.bin") + ",\n";
    s += "      \"exp_avg\": " + entry(dir, "exp_avg.bin") + ",\n";
    s += "      \"exp_avg_sq\": " + entry(dir, "exp_avg_sq.bin") + "\n    }\n  ],\n";
    return ckpt::seal_manifest(s);
}

bool has_tmp_dirs(const std::string& root) {
    for (const auto& e : fs::directory_iterator(root))
        if (e.path().filename().string().rfind(".tmp-", 0) == 0) return true;
    return false;
}

} // namespace

TEST_CASE("a manifest in the pre-nlohmann layout still loads, bit for bit") {
    std::string root = ckpt_scratch("survive_old_layout");
    ckpt::Manifest m = small_manifest(7);
    ckpt::State s = small_state(m);
    std::string dir = ckpt::save(root, m, s, 0, 0, 1);
    spit(dir + "/manifest.json", old_layout_manifest(dir, m));
    ckpt::Manifest got;
    ckpt::State st;
    ckpt::load(dir, &got, &st, 0, 1);
    CHECK(got.step == 7);
    CHECK(got.num_params == m.num_params);
    CHECK(got.model.channels == 8);
    CHECK(got.train_data == m.train_data);
    CHECK(got.data_identity.empty()); // the old layout has no data fingerprint
    CHECK(bit_equal(st.params, s.params));
    CHECK(bit_equal(st.exp_avg_sq, s.exp_avg_sq));
}

TEST_CASE("manifest JSON: duplicate keys and floats where integers belong are refused") {
    expect_error([] { ckpt::shard_from_json("{\"step\": 1, \"step\": 2}", "x.json"); },
                 core::ErrorKind::Format, {"x.json", "duplicate key \"step\""});
    expect_error([] { ckpt::shard_from_json("{\"world_size\": 1.5, \"step\": 1}", "y.json"); },
                 core::ErrorKind::Format, {"y.json", "\"world_size\" must be an integer"});
    expect_error([] { ckpt::shard_from_json("{\"world_size\": 1} x", "z.json"); },
                 core::ErrorKind::Format, {"z.json", "after the end"});
}

TEST_CASE("a save that fails (file size limit, as on a full disk) leaves no temporary directory") {
    std::string root = ckpt_scratch("survive_failed_save");
    ckpt::Manifest m = small_manifest(3);
    ckpt::State s = small_state(m);
    std::string good = ckpt::save(root, m, s, 0, 0, 1);
    m.step = 4;
    s.params.resize(20000); // 80 KB per file: beyond the limit below
    s.exp_avg.resize(20000);
    s.exp_avg_sq.resize(20000);
    m.num_params = 20000;
    std::signal(SIGXFSZ, SIG_IGN); // write() then fails with EFBIG instead of killing us
    rlimit old{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit lim = old;
    lim.rlim_cur = 4096;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    bool threw = false;
    try {
        ckpt::save(root, m, s, 0, 0, 1);
    } catch (const core::Error& e) {
        threw = true;
        CHECK(e.kind() == core::ErrorKind::Io);
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, SIG_DFL);
    CHECK(threw);
    CHECK_FALSE(has_tmp_dirs(root));
    CHECK(ckpt::find_latest(root) == good);
}

TEST_CASE("clean_interrupted: temporary directories go, an orphaned .old-step_N comes back") {
    std::string root = ckpt_scratch("survive_clean");
    ckpt::Manifest m = small_manifest(3);
    ckpt::State s = small_state(m);
    std::string s3 = ckpt::save(root, m, s, 0, 0, 1);
    m.step = 4;
    std::string s4 = ckpt::save(root, m, s, 0, 0, 1);
    // killed while writing step 5, and killed between the two renames of a re-save of step 4
    fs::create_directories(root + "/.tmp-step_00000005");
    spit(root + "/.tmp-step_00000005/params.bin", "partial");
    fs::rename(s4, root + "/.old-step_00000004");
    // a stale .old of a step that exists
    fs::create_directories(root + "/.old-step_00000003");
    std::vector<std::string> done = ckpt::clean_interrupted(root);
    CHECK(done.size() == 3);
    CHECK_FALSE(fs::exists(root + "/.tmp-step_00000005"));
    CHECK_FALSE(fs::exists(root + "/.old-step_00000003"));
    CHECK_FALSE(fs::exists(root + "/.old-step_00000004"));
    CHECK(ckpt::find_latest(root) == s4);
    ckpt::Manifest got;
    ckpt::State st;
    ckpt::load(s4, &got, &st, 0, 1);
    CHECK(got.step == 4);
    CHECK(ckpt::find_latest(root) == s4);
    CHECK(fs::exists(s3));
}

TEST_CASE("resume compatibility: architecture, data and optimizer must match; lr may change") {
    config::Config a = config::parse_deck_text("", "a.yaml");
    ckpt::Manifest m;
    m.model.num_layers = 4;
    m.model.num_heads = 4;
    m.model.channels = 128;
    m.model.max_seq_len = 256;
    m.model.vocab_size = 512;
    m.model.padded_vocab_size = 512;
    m.deck_yaml = config::effective_yaml(a);
    model::ArchConfig same = m.model;
    CHECK(ckpt::compare_runs(m, a, same, "").empty());

    config::Config b = a;
    b.train.lr = 5e-4f;
    b.train.steps = 500;
    b.offload.schedule = config::Schedule::Synchronous;
    std::vector<ckpt::DeckChange> ok = ckpt::check_resume("ck", m, b, same, "");
    REQUIRE(ok.size() == 3);
    CHECK(ok[0].key == "train.steps");
    CHECK(ok[0].saved == "100");
    CHECK(ok[0].now == "500");
    CHECK(ok[1].key == "train.lr");

    model::ArchConfig heads = same;
    heads.num_heads = 8; // same parameter count: only the manifest's dims tell
    config::Config c = a;
    c.data.builtin.seed = 99;  // another corpus of the same size
    c.optimizer.beta2 = 0.95f; // moments mean something else
    c.train.lr = 1e-4f;        // allowed
    expect_error(
        [&] { ckpt::check_resume("ck/step_00000010", m, c, heads, ""); }, core::ErrorKind::Config,
        {"cannot resume from ck/step_00000010", "model.num_heads: checkpoint 4, this run 8",
         "data.builtin.seed: checkpoint 1234, this run 99",
         "optimizer.beta2: checkpoint 0.999, this run 0.95"});
    try {
        ckpt::check_resume("ck", m, c, heads, "");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("train.lr") == std::string::npos);
    }

    // shards: the same glob over other files is another corpus; moved files are the same one
    m.data_identity = "shards=1 bytes=2048 fnv1a64=0000000000000001";
    expect_error([&] { ckpt::check_resume("ck", m, a, same, "shards=1 bytes=2048 fnv1a64=02"); },
                 core::ErrorKind::Config, {"data identity", "fnv1a64=02"});
    config::Config moved = a;
    moved.data.train = "elsewhere/*.bin";
    ok = ckpt::check_resume("ck", m, moved, same, m.data_identity);
    REQUIRE(ok.size() == 1);
    CHECK(ok[0].key == "data.train");
}

TEST_CASE("resume compatibility: every architecture key of the field table is compared") {
    // A Llama with llama3 rope scaling; each key with the Arch resume policy changed in turn (as
    // the deck of the resuming run would change it) must be refused, naming that key. The keys
    // come from the table: a new architecture key without a change listed here fails the test.
    const std::string base = "model:\n  type: llama\n  num_layers: 2\n  num_heads: 4\n"
                             "  num_kv_heads: 2\n  channels: 32\n  intermediate_size: 64\n"
                             "  max_seq_len: 64\n  vocab_size: 100\n  tie_embeddings: false\n"
                             "  rope_scaling:\n    type: llama3\n";
    // the YaRN keys are compared on a YaRN model, the window layers on a windowed one (a field
    // of a scaling not in use, or layer_types without a window, does not change the model)
    const std::string yarn = "model:\n  type: llama\n  num_layers: 2\n  num_heads: 4\n"
                             "  num_kv_heads: 2\n  channels: 32\n  intermediate_size: 64\n"
                             "  max_seq_len: 64\n  vocab_size: 100\n  tie_embeddings: false\n"
                             "  rope_scaling:\n    type: yarn\n  sliding_window: 8\n";
    // the MoE keys on a MoE model (with its load-balancing loss on, so its coefficient counts)
    const std::string moe = "model:\n  type: qwen3_moe\n  num_layers: 2\n  num_heads: 4\n"
                            "  num_kv_heads: 2\n  channels: 32\n  intermediate_size: 64\n"
                            "  max_seq_len: 64\n  vocab_size: 100\n  num_experts: 4\n"
                            "  num_experts_per_tok: 2\n  moe_intermediate_size: 16\n"
                            "  output_router_logits: true\n";
    const std::set<std::string> moe_keys = {
        "model.num_experts",          "model.num_experts_per_tok", "model.moe_intermediate_size",
        "model.norm_topk_prob",       "model.decoder_sparse_step", "model.mlp_only_layers",
        "model.router_aux_loss_coef", "model.output_router_logits"};
    auto base_of = [&](const std::string& key) {
        if (moe_keys.count(key)) return moe;
        return key.find("beta_") != std::string::npos ||
                       key.find("attention_factor") != std::string::npos ||
                       key.find("truncate") != std::string::npos || key == "model.layer_types"
                   ? yarn
                   : base;
    };
    const config::Config a = config::parse_deck_text(base, "a.yaml");
    ckpt::Manifest m;
    m.model = model::config_for(a.model);
    m.deck_yaml = config::effective_yaml(a);
    CHECK(ckpt::compare_runs(m, a, model::config_for(a.model), "").empty());
    const config::Config ay = config::parse_deck_text(yarn, "ay.yaml");
    ckpt::Manifest my;
    my.model = model::config_for(ay.model);
    my.deck_yaml = config::effective_yaml(ay);
    CHECK(ckpt::compare_runs(my, ay, model::config_for(ay.model), "").empty());
    const config::Config am = config::parse_deck_text(moe, "am.yaml");
    ckpt::Manifest mmoe;
    mmoe.model = model::config_for(am.model);
    mmoe.deck_yaml = config::effective_yaml(am);
    CHECK(ckpt::compare_runs(mmoe, am, model::config_for(am.model), "").empty());
    const std::map<std::string, std::string> change = {
        {"model.type", "qwen2"},
        {"model.num_layers", "3"},
        {"model.num_heads", "8"},
        {"model.channels", "64"},
        {"model.max_seq_len", "128"},
        {"model.vocab_size", "90"},
        {"model.padded_vocab_size", "256"},
        {"model.num_kv_heads", "4"},
        {"model.head_dim", "16"},
        {"model.intermediate_size", "96"},
        {"model.norm_eps", "1e-6"},
        {"model.rope_theta", "500000"},
        {"model.rope_scaling.type", "none"},
        {"model.rope_scaling.factor", "4"},
        {"model.rope_scaling.low_freq_factor", "2"},
        {"model.rope_scaling.high_freq_factor", "3"},
        {"model.rope_scaling.original_max_position_embeddings", "4096"},
        {"model.rope_scaling.beta_fast", "16"},
        {"model.rope_scaling.beta_slow", "2"},
        {"model.rope_scaling.attention_factor", "1.5"},
        {"model.rope_scaling.truncate", "false"},
        {"model.tie_embeddings", "true"},
        {"model.attention_bias", "true"},
        {"model.attention_out_bias", "true"},
        {"model.mlp_bias", "true"},
        {"model.attention_sinks", "true"},
        {"model.sliding_window", "16"},
        {"model.layer_types", "sliding,full"},
        {"model.num_experts", "8"},
        {"model.num_experts_per_tok", "1"},
        {"model.moe_intermediate_size", "24"},
        {"model.norm_topk_prob", "true"},
        {"model.decoder_sparse_step", "2"},
        {"model.mlp_only_layers", "1"},
        {"model.router_aux_loss_coef", "0.01"},
        {"model.output_router_logits", "false"},
    };
    config::Config probe = a;
    int arch_keys = 0;
    for (const config::Field& f : config::bind_fields(probe)) {
        if (f.resume != config::Resume::Arch) continue;
        arch_keys++;
        CAPTURE(f.key);
        auto it = change.find(f.key);
        REQUIRE_MESSAGE(it != change.end(), "no change listed for architecture key " << f.key);
        const std::string& bt = base_of(f.key);
        const ckpt::Manifest& mm = bt == yarn ? my : bt == moe ? mmoe : m;
        const config::Config b =
            config::load_deck_from_string(base_of(f.key), "b.yaml", {f.key + "=" + it->second});
        std::vector<ckpt::DeckChange> ch =
            ckpt::compare_runs(mm, b, model::config_for(b.model), "");
        bool named = false;
        for (const ckpt::DeckChange& c : ch) {
            named |= c.key == f.key;
            CHECK_FALSE(c.allowed);
        }
        CHECK_MESSAGE(named, "a change of " << f.key << " was not reported");
        expect_error([&] { ckpt::check_resume("ck", mm, b, model::config_for(b.model), ""); },
                     core::ErrorKind::Config, {f.key + ": checkpoint "});
    }
    CHECK(arch_keys == static_cast<int>(change.size()));
    // two spellings of one model are the same model: kv heads 0 (= heads), head_dim 0 (= C/NH)
    const config::Config gqa = config::parse_deck_text(
        "model:\n  type: llama\n  num_heads: 4\n  num_kv_heads: 4\n  channels: 32\n"
        "  intermediate_size: 64\n",
        "gqa.yaml");
    config::Config plain = gqa;
    plain.model.num_kv_heads = 0;
    plain.model.head_dim = 8;
    ckpt::Manifest g;
    g.model = model::config_for(gqa.model);
    g.deck_yaml = config::effective_yaml(gqa);
    CHECK(ckpt::compare_runs(g, plain, model::config_for(plain.model), "").empty());
}

TEST_CASE("resume compatibility: optimizer.state_dtype changes only when asked to convert") {
    config::Config a = config::parse_deck_text("", "a.yaml"); // fp32 moments
    ckpt::Manifest m;
    m.model.num_layers = 4;
    m.model.num_heads = 4;
    m.model.channels = 128;
    m.model.max_seq_len = 256;
    m.model.vocab_size = 512;
    m.model.padded_vocab_size = 512;
    m.deck_yaml = config::effective_yaml(a);
    model::ArchConfig same = m.model;
    config::Config b = a;
    b.optimizer.state_dtype = config::StateDtype::BF16;
    expect_error([&] { ckpt::check_resume("ck", m, b, same, ""); }, core::ErrorKind::Config,
                 {"optimizer.state_dtype: checkpoint fp32, this run bf16",
                  "train.resume_convert_state: true"});
    b.train.resume_convert_state = true;
    std::vector<ckpt::DeckChange> ok = ckpt::check_resume("ck", m, b, same, "");
    bool listed = false;
    for (const ckpt::DeckChange& c : ok)
        listed |= c.key == "optimizer.state_dtype" && c.saved == "fp32" && c.now == "bf16";
    CHECK(listed);
    // an unresolved auto runs fp32 moments: no change
    config::Config c = a;
    c.optimizer.state_dtype = config::StateDtype::Auto;
    for (const ckpt::DeckChange& d : ckpt::compare_runs(m, c, same, ""))
        CHECK(d.key != "optimizer.state_dtype");
}
