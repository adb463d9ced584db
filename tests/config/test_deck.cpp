// Deck loading that succeeds: defaults, every enum spelling, overrides, flat dotted keys, the
// effective-deck round trip (exact, every key), float formatting and the command-line parser.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "config/fields.h"
#include "core/error.h"
#include "deck_test_util.h"

using namespace sof;
using namespace sof::config;
using sof::test::contains;

namespace {

// "section.key" -> value text, from an effective deck.
std::map<std::string, std::string> flatten(const std::string& yaml) {
    std::map<std::string, std::string> out;
    std::vector<std::string> stack;
    std::stringstream ss(yaml);
    for (std::string line; std::getline(ss, line);) {
        if (line.empty() || line[0] == '#') continue;
        size_t indent = line.find_first_not_of(' ');
        size_t depth = indent / 2;
        size_t colon = line.find(':');
        std::string name = line.substr(indent, colon - indent);
        std::string value = colon + 1 < line.size() ? line.substr(colon + 2) : "";
        stack.resize(depth);
        std::string full;
        for (const auto& s : stack)
            full += s + ".";
        if (value.empty())
            stack.push_back(name);
        else
            out[full + name] = value;
    }
    return out;
}

} // namespace

TEST_CASE("an empty deck gives the documented defaults") {
    Config c = load_deck_from_string("", "empty.yaml", {});
    Config d;
    CHECK(effective_yaml(c) == effective_yaml(d));
    CHECK(c.deck_path == "empty.yaml");
    CHECK(c.model.num_layers == 4);
    CHECK(c.model.padded_vocab_size == 0);
    CHECK(c.train.lr == 1e-3f);
    CHECK(c.train.schedule == LrSchedule::Constant);
    CHECK(c.optimizer.beta2 == 0.999f);
    CHECK(c.offload.bucket_mb == 64.0);
    CHECK(c.offload.gpu_tail_buckets == 0);
    CHECK(c.offload.interleave_k == -1);
    CHECK(c.parallel.zero_stage == 3);
    CHECK(c.runtime.log_level == core::LogLevel::Info);
    CHECK(c.data.train == "builtin");
    CHECK(c.debug.inject_nonfinite_steps.empty());
    // comments only, or empty sections, are empty decks too
    CHECK(effective_yaml(load_deck_from_string("# nothing\n", "c.yaml", {})) == effective_yaml(d));
    CHECK(effective_yaml(load_deck_from_string("train:\nmodel:\n", "s.yaml", {})) ==
          effective_yaml(d));
}

TEST_CASE("all_keys lists every key once, in sections") {
    std::vector<std::string> keys = all_keys();
    std::set<std::string> uniq(keys.begin(), keys.end());
    CHECK(uniq.size() == keys.size());
    CHECK(keys.size() > 60);
    for (const char* k : {"train.lr", "data.builtin.seed", "offload.gpu_tail_buckets",
                          "debug.inject_nonfinite_steps", "parallel.sp", "device.memory_gb"})
        CHECK(uniq.count(k) == 1);
    // every key of the effective deck is in all_keys and the other way round
    auto flat = flatten(effective_yaml(Config()));
    CHECK(flat.size() == keys.size());
    for (const auto& k : keys)
        CHECK_MESSAGE(flat.count(k) == 1, k);
}

TEST_CASE("values of every type are read") {
    Config c = load_deck_from_string(R"(model:
  num_layers: 2
  recompute: yes
  init_std: 1.0e-2
data:
  shuffle: off
  seed: 18446744073709551615
  builtin:
    train_tokens: 5000000000
train:
  lr: 3e-4
  min_lr: .0001
  checkpoint_dir: "runs/a b"
offload:
  bucket_mb: 0.25
  gpu_tail_buckets: auto
  interleave_k: 4
debug:
  inject_nonfinite_steps: [3, 7]
)",
                                     "types.yaml", {});
    CHECK(c.model.num_layers == 2);
    CHECK(c.model.recompute);
    CHECK(c.model.init_std == 0.01f);
    CHECK_FALSE(c.data.shuffle);
    CHECK(c.data.seed == 18446744073709551615ull);
    CHECK(c.data.builtin.train_tokens == 5000000000ll);
    CHECK(c.train.lr == 3e-4f);
    CHECK(c.train.min_lr == 1e-4f);
    CHECK(c.train.checkpoint_dir == "runs/a b");
    CHECK(c.offload.bucket_mb == 0.25);
    CHECK(c.offload.gpu_tail_buckets == -1);
    CHECK(c.offload.interleave_k == 4);
    CHECK(c.debug.inject_nonfinite_steps == std::vector<int>{3, 7});
}

TEST_CASE("every enum spelling maps to its value") {
    auto ov = [](const std::string& kv) { return load_deck_from_string("", "e.yaml", {kv}); };
    CHECK(ov("train.schedule=constant").train.schedule == LrSchedule::Constant);
    CHECK(ov("train.schedule=cosine").train.schedule == LrSchedule::Cosine);
    CHECK(ov("train.dtype=fp32").train.dtype == Precision::FP32);
    CHECK(ov("train.dtype=bf16").train.dtype == Precision::BF16);
    CHECK(ov("optimizer.type=adamw").optimizer.type == AdamMode::AdamW);
    CHECK(ov("optimizer.type=adam").optimizer.type == AdamMode::Adam);
    CHECK(ov("offload.schedule=superoffload").offload.schedule == Schedule::SuperOffload);
    CHECK(ov("offload.schedule=interleaved").offload.schedule == Schedule::Interleaved);
    CHECK(ov("offload.schedule=synchronous").offload.schedule == Schedule::Synchronous);
    CHECK(ov("offload.rollback=exact").offload.rollback == Rollback::Exact);
    CHECK(ov("offload.rollback=inverse").offload.rollback == Rollback::Inverse);
    CHECK(ov("offload.cast=device").offload.cast == CastAt::Device);
    CHECK(ov("offload.cast=host").offload.cast == CastAt::Host);
    CHECK(ov("offload.weights=stationary").offload.weights == WeightsPolicy::Stationary);
    CHECK(ov("offload.weights=flow").offload.weights == WeightsPolicy::Flow);
    CHECK(ov("offload.weights=auto").offload.weights == WeightsPolicy::Auto);
    CHECK(ov("device.type=auto").device.type == DeviceType::Auto);
    CHECK(ov("device.type=host").device.type == DeviceType::Host);
    CHECK(ov("device.type=cuda").device.type == DeviceType::Cuda);
    CHECK(ov("runtime.log_level=quiet").runtime.log_level == core::LogLevel::Quiet);
    CHECK(ov("runtime.log_level=info").runtime.log_level == core::LogLevel::Info);
    CHECK(ov("runtime.log_level=debug").runtime.log_level == core::LogLevel::Debug);
    CHECK(ov("model.type=gpt2").model.type == ModelType::Gpt2);
    CHECK(ov("model.type=qwen3").model.type == ModelType::Qwen3);
    CHECK(ov("parallel.zero_stage=0").parallel.zero_stage == 0);
    CHECK(ov("parallel.zero_stage=3").parallel.zero_stage == 3);
    // spelled in capitals is accepted and normalised
    CHECK(ov("train.schedule=Cosine").train.schedule == LrSchedule::Cosine);
    CHECK(ov("runtime.log_level=DEBUG").runtime.log_level == core::LogLevel::Debug);
    // every choice of every enum key loads and echoes as itself
    Config base;
    for (const Field& f : bind_fields(base)) {
        for (const std::string& ch : f.choices) {
            // the LLaMA family needs its MLP size as well
            Config c = f.key == "model.type" && ch != "gpt2"
                           ? load_deck_from_string("", "e.yaml",
                                                   {f.key + "=" + ch, "model.intermediate_size=64"})
                           : ov(f.key + "=" + ch);
            CHECK_MESSAGE(flatten(effective_yaml(c))[f.key] == ch, f.key << "=" << ch);
        }
    }
}

TEST_CASE("overrides apply in order after the file and may use dotted keys") {
    const char* deck = "train:\n  steps: 10\n  lr: 0.5\n";
    Config c = load_deck_from_string(deck, "o.yaml",
                                     {"train.steps=20", "train.steps=30", "optimizer.beta1=0.8",
                                      "debug.inject_nonfinite_steps=[1, 4]",
                                      "offload.interleave_k=auto", "runtime.trace=t.json"});
    CHECK(c.train.steps == 30);
    CHECK(c.train.lr == 0.5f);
    CHECK(c.optimizer.beta1 == 0.8f);
    CHECK(c.debug.inject_nonfinite_steps == std::vector<int>{1, 4});
    CHECK(c.offload.interleave_k == -1);
    CHECK(c.runtime.trace == "t.json");
    // lists: comma form, single value, empty
    CHECK(load_deck_from_string("", "l", {"debug.inject_nonfinite_steps=2,5"})
              .debug.inject_nonfinite_steps == std::vector<int>{2, 5});
    CHECK(load_deck_from_string("", "l", {"debug.inject_nonfinite_steps=9"})
              .debug.inject_nonfinite_steps == std::vector<int>{9});
    CHECK(load_deck_from_string("debug:\n  inject_nonfinite_steps: [1]\n", "l",
                                {"debug.inject_nonfinite_steps=[]"})
              .debug.inject_nonfinite_steps.empty());
    // an override may clear a string
    CHECK(load_deck_from_string("runtime:\n  trace: x.json\n", "s", {"runtime.trace="})
              .runtime.trace.empty());
    // flat dotted keys in the file
    Config f = load_deck_from_string("train.lr: 0.25\ndata.builtin.seed: 7\n", "flat.yaml", {});
    CHECK(f.train.lr == 0.25f);
    CHECK(f.data.builtin.seed == 7u);
}

TEST_CASE("tiny floats read the same on every CPU; overflow is refused") {
    // 1.17549435e-38 rounds up to FLT_MIN; glibc's strtof calls it an underflow (ERANGE) on
    // aarch64 (tininess before rounding) and not on x86-64: the aarch64 cross run found the
    // effective deck's FLT_MIN refused there. A subnormal is an underflow on both.
    Config c = load_deck_from_string("train.min_lr: 1.17549435e-38\n", "tiny.yaml", {});
    CHECK(c.train.min_lr == std::numeric_limits<float>::min());
    c = load_deck_from_string("train.min_lr: 1.0e-41\n", "sub.yaml", {});
    CHECK(c.train.min_lr == 1.0e-41f);
    CHECK(c.train.min_lr > 0.0f);
    CHECK_THROWS_AS(load_deck_from_string("train.min_lr: 1.0e39\n", "big.yaml", {}), core::Error);
}

TEST_CASE("effective deck round trip is exact with every key changed") {
    std::string d = test::scratch("roundtrip");
    test::write_file(d + "/w1.bin", "x");
    test::write_file(d + "/init.bin", "x");
    test::write_file(d + "/hw.yaml", "x: 1\n");
    std::filesystem::create_directories(d + "/ck/step_00000004");
    test::write_file(d + "/ck/step_00000004/manifest.json", "{}"); // a checkpoint to resume
    std::filesystem::create_directories(d + "/plug ins");
    std::string deck = R"(model:
  type: qwen3
  num_layers: 3
  num_heads: 6
  channels: 96
  max_seq_len: 100
  vocab_size: 300
  padded_vocab_size: 320
  num_kv_heads: 2
  head_dim: 24
  intermediate_size: 250
  norm_eps: 1.5e-6
  rope_theta: 500000.5
  rope_scaling:
    type: llama3
    factor: 7.5
    low_freq_factor: 1.25
    high_freq_factor: 3.5
    original_max_position_embeddings: 4096
    beta_fast: 24.5
    beta_slow: 1.5
    attention_factor: 1.125
    truncate: false
  tie_embeddings: false
  attention_bias: true
  attention_out_bias: true
  mlp_bias: true
  attention_sinks: true
  sliding_window: 128
  layer_types: "sliding,full"
  num_experts: 8
  num_experts_per_tok: 3
  moe_intermediate_size: 40
  norm_topk_prob: true
  decoder_sparse_step: 2
  mlp_only_layers: "0,2"
  router_aux_loss_coef: 0.015625
  output_router_logits: true
  router_z_loss_coef: 0.00390625
  attention_dropout: 0.125
  residual_dropout: 0.0625
  init_from: "D/init.bin"
  init_std: 0.0123456789
  recompute: true
  loss_tile: 2048
  mlp_tile: 0
  offload_checkpoints: true
  device_checkpoints: 2
data:
  train: "D/w*.bin"
  val: "D/w1.bin"
  shuffle: false
  seed: 18446744073709551615
  loss_mask: require
  pack: true
  eos_id: 50256
  builtin:
    seed: 99
    train_tokens: 123457
    val_tokens: 54321
train:
  batch_size: 3
  seq_len: 96
  grad_accum: 5
  global_batch: 15
  steps: 17
  stop_after: 9
  lr: 0.1
  min_lr: 1.17549435e-38
  warmup_steps: 2
  schedule: cosine
  decay_fraction: 0.125
  grad_clip: 0.3333333
  eval_every: 7
  eval_batches: 2
  log_every: 3
  seed: 5
  checkpoint_every: 4
  checkpoint_dir: "with \"quotes\" and: colon #hash"
  keep_checkpoints: 0
  resume: "D/ck/step_00000004"
  resume_convert_state: true
  metrics: "true"
  dtype: bf16
optimizer:
  plugin: "on"
  plugin_dir: "D/plug ins"
  type: adam
  beta1: 0.85
  beta2: 0.99999988
  eps: 1.0e-30
  weight_decay: 0.05
  bias_correction: false
  threads: 7
  state_dtype: bf16
  state_block: 128
  master_dtype: bf16
offload:
  enabled: true
  schedule: interleaved
  bucket_mb: 0.1
  stv: false
  rollback: inverse
  gpu_tail_buckets: auto
  cast: host
  weights: flow
  flow_grads: host
  prefetch_layers: 2
  interleave_k: 3
  hardware: "D/hw.yaml"
device:
  type: cuda
  memory_gb: 0.3
  id: 1
parallel:
  sp: 2
  zero_stage: 0
  bind: false
runtime:
  out_dir: "tab\there"
  trace: "~"
  threads: 3
  log_level: debug
debug:
  inject_nonfinite_steps: [0, 16, 2]
  inject_rank: 1
  fail_rank: 2
  fail_step: 5
  hold_for_stop: 3
  fail_hard: true
  fp32_gathers: true
  collectives: staged
  attention_kernel: cuda_cores
)";
    for (size_t p; (p = deck.find("D/")) != std::string::npos;)
        deck.replace(p, 2, d + "/");
    Config c1 = load_deck_from_string(deck, "all.yaml", {});
    std::string y1 = effective_yaml(c1);
    INFO(y1);
    // every key differs from its default (model.type has a single choice)
    auto flat = flatten(y1), defaults = flatten(effective_yaml(Config()));
    for (const std::string& k : all_keys())
        if (k != "model.type") CHECK_MESSAGE(flat[k] != defaults[k], k);
    // and reads back to the same values, bit for bit
    Config c2 = load_deck_from_string(y1, "echo.yaml", {});
    CHECK(effective_yaml(c2) == y1);
    CHECK(c2.train.checkpoint_dir == "with \"quotes\" and: colon #hash");
    CHECK(c2.runtime.out_dir == "tab\there");
    CHECK(c2.runtime.trace == "~");
    CHECK(c2.train.metrics == "true");
    CHECK(c2.optimizer.plugin == "on");
    CHECK(std::memcmp(&c1.train.min_lr, &c2.train.min_lr, 4) == 0);
    CHECK(std::memcmp(&c1.model.init_std, &c2.model.init_std, 4) == 0);
    CHECK(std::memcmp(&c1.device.memory_gb, &c2.device.memory_gb, 8) == 0);
    CHECK(c2.data.seed == c1.data.seed);
    CHECK(c2.debug.inject_nonfinite_steps == std::vector<int>{0, 16, 2});
}

TEST_CASE("float formatting is the shortest text that reads back exactly") {
    CHECK(format_float(0.001f) == "0.001");
    CHECK(format_float(3e-4f) == "0.0003");
    CHECK(format_float(1e-8f) == "1e-08");
    CHECK(format_float(64.0f) == "64");
    CHECK(format_double(0.1) == "0.1");
    std::mt19937 rng(7);
    int checked = 0;
    for (int i = 0; i < 20000; i++) {
        uint32_t bits = rng();
        float f;
        std::memcpy(&f, &bits, 4);
        if (!std::isfinite(f)) continue;
        float back = std::strtof(format_float(f).c_str(), nullptr);
        REQUIRE(std::memcmp(&f, &back, 4) == 0);
        uint64_t b64 = (static_cast<uint64_t>(rng()) << 32) | rng();
        double g;
        std::memcpy(&g, &b64, 8);
        if (!std::isfinite(g)) continue;
        double gb = std::strtod(format_double(g).c_str(), nullptr);
        REQUIRE(std::memcmp(&g, &gb, 8) == 0);
        checked++;
    }
    CHECK(checked > 10000);
}

TEST_CASE("yaml_quote keeps plain what reads back plain") {
    CHECK(yaml_quote("runs/tiny") == "runs/tiny");
    CHECK(yaml_quote("cpu_adam") == "cpu_adam");
    CHECK(yaml_quote("") == "\"\"");
    CHECK(yaml_quote("yes") == "\"yes\"");
    CHECK(yaml_quote("1e5") == "\"1e5\"");
    CHECK(yaml_quote("shards/*.bin") == "\"shards/*.bin\"");
    CHECK(yaml_quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
}

TEST_CASE("edit distance and nearest key") {
    CHECK(edit_distance("train.lrr", "train.lr") == 1);
    CHECK(edit_distance("trian.lr", "train.lr") == 1); // a swap costs one
    CHECK(edit_distance("", "abc") == 3);
    std::vector<std::string> keys = all_keys();
    CHECK(nearest("train.bach_size", keys) == "train.batch_size");
    CHECK(nearest("optimiser.beta1", keys) == "optimizer.beta1");
    CHECK(nearest("offload.bucket_size", keys).empty());
}
