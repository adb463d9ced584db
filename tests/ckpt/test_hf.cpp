// Hugging Face safetensors and directories: reader/writer round trips (F32, BF16 with round to
// nearest even, F16), every format error naming file and tensor, sharded import of slices, config.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/compat.h"
#include "ckpt/hf.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "ckpt_test_util.h"
#include "config/deck.h"
#include "model/model.h"
#include "model/block_spec.h"
#include "model/model_config.h"

using namespace sof;
using namespace sof::test;
namespace fs = std::filesystem;

namespace {

model::ArchConfig hf_model(model::Arch arch) {
    model::ArchConfig c;
    c.arch = arch;
    model::apply_arch_defaults(&c);
    c.max_seq_len = 32;
    c.vocab_size = 50;
    c.padded_vocab_size = 64; // rows 50..63 are padding: not in the files, zero after import
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.channels = 32;
    c.intermediate_size = 48;
    c.tie_embeddings = arch == model::Arch::Qwen2;
    if (arch == model::Arch::Qwen3) c.head_dim = 12;
    if (arch == model::Arch::Llama) {
        c.rope_scaling.type = model::RopeScalingType::Llama3;
        c.rope_scaling.factor = 8;
        c.rope_theta = 500000;
    }
    if (arch == model::Arch::Mistral) c.sliding_window = 7;
    if (arch == model::Arch::SeedOss) { // q/k/v biases, head_dim decoupled, dropout
        c.qkv_bias = true;
        c.head_dim = 12;
        c.attn_dropout = 0.1f;
        c.resid_dropout = 0.1f;
    }
    if (arch == model::Arch::Qwen3Moe) { // a dense layer, then 4 experts of width 16, top 2
        c.num_experts = 4;
        c.experts_per_tok = 2;
        c.moe_intermediate_size = 16;
        c.norm_topk_prob = true;
        c.mlp_only_layers = {0};
    }
    if (arch == model::Arch::Mixtral) { // every layer 4 experts as wide as the MLP, a window
        c.num_experts = 4;
        c.experts_per_tok = 2;
        c.moe_intermediate_size = c.intermediate_size;
        c.norm_topk_prob = true;
        c.sliding_window = 7;
    }
    if (arch == model::Arch::GptOss) { // biases, sinks, sliding/full, YaRN, experts with biases
        c.num_experts = 4;
        c.experts_per_tok = 2;
        c.moe_intermediate_size = c.intermediate_size;
        c.norm_topk_prob = true;
        c.sliding_window = 7;
        c.layer_types = "sliding,full";
        c.qkv_bias = c.o_bias = true;
        c.head_dim = 12;
        c.rope_theta = 150000;
        c.rope_scaling.type = model::RopeScalingType::Yarn;
        c.rope_scaling.factor = 4;
        c.rope_scaling.original_max_position = 16;
        c.rope_scaling.truncate = false;
    }
    return c;
}

// A file with a hand-written header and raw data.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << data;
}

} // namespace

TEST_CASE("safetensors: F32 and BF16 round trips, RNE rounding, F16 widening") {
    const std::string d = ckpt_scratch("st_roundtrip");
    std::vector<float> a = pattern(37, 3), b = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 0.0f};
    // 1 + 2^-8 is a tie between bf16 1.0 and 1.0078125: even -> 1.0; 1 + 3*2^-8 (tie) -> 1.015625
    std::vector<ckpt::SafetensorsOut> ts = {{"a", {37}, a.data()}, {"b.w", {5, 1}, b.data()}};
    ckpt::write_safetensors(d + "/f32.safetensors", ts, false);
    ckpt::write_safetensors(d + "/bf16.safetensors", ts, true);
    ckpt::SafetensorsFile f32(d + "/f32.safetensors"), bf(d + "/bf16.safetensors");
    REQUIRE(f32.find("b.w") != nullptr);
    CHECK(f32.find("b.w")->shape == std::vector<int64_t>{5, 1});
    std::vector<float> got(37);
    f32.read_f32(*f32.find("a"), 0, 37, got.data());
    CHECK(bit_equal(got, a));
    std::vector<float> g5(5);
    bf.read_f32(*bf.find("b.w"), 0, 5, g5.data());
    CHECK(g5 == std::vector<float>{1.0f, 1.0f, 1.015625f, -2.5f, 0.0f});
    std::vector<float> part(3);
    bf.read_f32(*bf.find("a"), 10, 3, part.data());
    for (int i = 0; i < 3; i++)
        CHECK(std::fabs(part[i] - a[10 + i]) <= std::fabs(a[10 + i]) * 0.004f);
    CHECK(ckpt::float_to_bf16(1.00390625f) == 0x3f80);
    CHECK(ckpt::float_to_bf16(1.01171875f) == 0x3f82);
    // F16: 1.0 = 0x3c00, -2.0 = 0xc000, smallest subnormal 2^-24 = 0x0001, 65504 = 0x7bff
    const uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
    write_raw(d + "/f16.safetensors", R"({"x":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})",
              std::string(reinterpret_cast<const char*>(h), 8));
    ckpt::SafetensorsFile f16(d + "/f16.safetensors");
    std::vector<float> g4(4);
    f16.read_f32(*f16.find("x"), 0, 4, g4.data());
    CHECK(g4 == std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f});
}

TEST_CASE("bf16 export with stochastic rounding: neighbours only, unbiased, exact values kept, "
          "the same bytes for the same key") {
    // 1 + 0.3 bf16 steps (a step is 2^-7 at 1.0), -(2 + 0.25 steps of 2^-6), exact 1.5, -0.0 and
    // a subnormal
    const float up = 1.0f + 0.3f * 0x1p-7f, dn = -(2.0f + 0.25f * 0x1p-6f);
    const size_t n = 40000;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++)
        x[i] = i % 4 == 0   ? up
               : i % 4 == 1 ? dn
               : i % 4 == 2 ? 1.5f
                            : (i % 8 == 3 ? -0.0f : 0x1p-140f);
    std::vector<float> a = x, b = x, c = x;
    ckpt::round_bf16_stochastic(a.data(), n, 42, 25);
    ckpt::round_bf16_stochastic(b.data(), n, 42, 25);
    ckpt::round_bf16_stochastic(c.data(), n, 42, 26);
    CHECK(bit_equal(a, b));  // keyed by (seed, step, element): the same export every time
    CHECK(!bit_equal(a, c)); // another step draws other bits
    double sum_up = 0, sum_dn = 0;
    int n_up = 0, n_dn = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float r = a[i];
        bad += (std::bit_cast<uint32_t>(r) & 0xffffu) != 0; // a bf16 value
        if (i % 4 == 0) {
            bad += r != 1.0f && r != 1.0078125f; // one of the two neighbours
            sum_up += r, n_up++;
        } else if (i % 4 == 1) {
            bad += r != -2.0f && r != -2.015625f;
            sum_dn += r, n_dn++;
        } else if (i % 4 == 2) {
            bad += r != 1.5f;
        } else if (i % 8 == 3) {
            bad += std::bit_cast<uint32_t>(r) != 0x80000000u; // -0.0 kept
        } else { // 2^-140 (fp32 subnormal bits 0x200): 0 or the bf16 subnormal 0x0001 (2^-133)
            bad += std::bit_cast<uint32_t>(r) != 0u && std::bit_cast<uint32_t>(r) != 0x10000u;
        }
    }
    CHECK(bad == 0);
    // the mean is the unrounded value (10,000 draws each: the standard error is ~0.005 of a step)
    CHECK(std::fabs(sum_up / n_up - up) < 0.02 * 0x1p-7);
    CHECK(std::fabs(sum_dn / n_dn - dn) < 0.02 * 0x1p-6);
    // nearest would have dropped both changes: 1.0 and -2.0
    CHECK(ckpt::float_to_bf16(up) == 0x3f80);
    CHECK(ckpt::float_to_bf16(dn) == 0xc000);
}

TEST_CASE("safetensors: format errors name the file and the tensor") {
    const std::string d = ckpt_scratch("st_errors");
    auto open = [](const std::string& p) { ckpt::SafetensorsFile f(p); };
    write_raw(d + "/trunc.safetensors",
              R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0'));
    expect_error([&] { open(d + "/trunc.safetensors"); }, core::ErrorKind::Format,
                 {"trunc.safetensors", "'w'", "truncated"});
    write_raw(d + "/overlap.safetensors",
              R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
              std::string(12, '\0'));
    expect_error([&] { open(d + "/overlap.safetensors"); }, core::ErrorKind::Format,
                 {"overlap.safetensors", "overlap"});
    write_raw(d + "/size.safetensors", R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})",
              std::string(8, '\0'));
    expect_error([&] { open(d + "/size.safetensors"); }, core::ErrorKind::Format,
                 {"size.safetensors", "'a'", "BF16"});
    write_raw(d + "/dtype.safetensors", R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
              std::string(8, '\0'));
    expect_error([&] { open(d + "/dtype.safetensors"); }, core::ErrorKind::Format,
                 {"dtype.safetensors", "'a'", "I64"});
    spit(d + "/short.safetensors", std::string("\x10\0\0\0\0\0\0\0{}", 10));
    expect_error([&] { open(d + "/short.safetensors"); }, core::ErrorKind::Format,
                 {"short.safetensors", "header length"});
}

TEST_CASE("safetensors: the tensors must tile the data area (a header length a byte short)") {
    const std::string d = ckpt_scratch("st_tiling");
    auto open = [](const std::string& p) { ckpt::SafetensorsFile f(p); };
    // a header padded with spaces to 8 bytes, as writers do; data 2 floats + 1 float
    std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
    header.append(8 - header.size() % 8 + 2, ' ');
    const std::string data(12, '\x01');
    write_raw(d + "/good.safetensors", header, data);
    open(d + "/good.safetensors");
    // the length one byte short cuts only into the padding: the JSON still parses, but every
    // tensor would be read one byte off; one byte of the data area belongs to no tensor
    std::string bytes = slurp(d + "/good.safetensors");
    bytes[0] = static_cast<char>(bytes[0] - 1);
    spit(d + "/short_by_one.safetensors", bytes);
    expect_error([&] { open(d + "/short_by_one.safetensors"); }, core::ErrorKind::Format,
                 {"short_by_one.safetensors", "belong to no tensor", "header length"});
    // a hole between two tensors, and bytes after the last one
    write_raw(d + "/hole.safetensors",
              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
              std::string(12, '\0'));
    expect_error([&] { open(d + "/hole.safetensors"); }, core::ErrorKind::Format,
                 {"hole.safetensors", "[4, 8)", "'b'"});
    write_raw(d + "/tail.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
              std::string(7, '\0'));
    expect_error([&] { open(d + "/tail.safetensors"); }, core::ErrorKind::Format,
                 {"tail.safetensors", "3 bytes belong to no tensor"});
}

TEST_CASE("HF import refuses a non-finite weight, naming the tensor and its first bad index") {
    const model::ArchConfig c = hf_model(model::Arch::Llama);
    const model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params);
    model::init_params(l, p.data(), 0.05f, 5);
    const model::TensorInfo* t = nullptr;
    for (const model::TensorInfo& x : l.tensors)
        if (x.name == "model.layers.1.mlp.up_proj.weight") t = &x;
    REQUIRE(t != nullptr);
    REQUIRE(t->shape == std::vector<int>{48, 32});
    p[t->offset + 3 * 32 + 7] = std::numeric_limits<float>::infinity(); // [3, 7]
    p[t->offset + 5 * 32 + 1] = std::nanf("");                          // a later one
    const std::string d = ckpt_scratch("hf_nonfinite");
    ckpt::HfExportOptions o;
    o.dtype = "fp32";
    ckpt::export_hf(d + "/m", l, p.data(), o);
    std::vector<float> got(l.num_params);
    expect_error(
        [&] { ckpt::import_hf(d + "/m", l, zero::make_shard_map(l, 1, 0), got.data()); },
        core::ErrorKind::Format,
        {"model.safetensors", "model.layers.1.mlp.up_proj.weight", "non-finite", "[3, 7]"});
    // a rank whose slice holds no bad value imports its slice; the one holding it refuses
    int refused = 0;
    for (int rank = 0; rank < 4; rank++) {
        const zero::ShardMap m = zero::make_shard_map(l, 4, rank);
        std::vector<float> mine(m.local_size);
        try {
            ckpt::import_hf(d + "/m", l, m, mine.data());
        } catch (const core::Error& e) {
            CHECK(std::string(e.what()).find("up_proj") != std::string::npos);
            refused++;
        }
    }
    CHECK(refused >= 1);
    CHECK(refused < 4);
}

TEST_CASE("HF directories: config round trip, sharded export, slice import, errors") {
    for (model::Arch arch : {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3,
                             model::Arch::Phi3, model::Arch::Mistral, model::Arch::SeedOss,
                             model::Arch::Qwen3Moe, model::Arch::Mixtral, model::Arch::GptOss}) {
        CAPTURE(model::arch_name(arch));
        const model::ArchConfig c = hf_model(arch);
        const model::ParamLayout l = model::make_layout(c);
        std::vector<float> p(l.num_params);
        model::init_params(l, p.data(), 0.05f, 11);
        const std::string d = ckpt_scratch(std::string("hf_") + model::arch_name(arch));
        ckpt::HfExportOptions o;
        o.dtype = "fp32";
        o.shard_bytes = 20000; // several files: the index path
        ckpt::export_hf(d + "/out", l, p.data(), o);
        CHECK(fs::exists(d + "/out/model.safetensors.index.json"));
        CHECK_FALSE(fs::exists(d + "/out/model.safetensors"));
        const model::ArchConfig r = ckpt::read_hf_config(d + "/out");
        CHECK(r.arch == c.arch);
        CHECK(r.kv_heads() == 2);
        CHECK(r.hdim() == c.hdim());
        CHECK(r.tie_embeddings == c.tie_embeddings);
        CHECK(r.qkv_bias == c.qkv_bias);
        CHECK(r.qk_norm == c.qk_norm);
        CHECK(r.rope_scaling.type == c.rope_scaling.type);
        CHECK(r.o_bias == c.o_bias);
        CHECK(r.sliding_window == c.sliding_window);
        CHECK(r.attn_dropout == c.attn_dropout);
        CHECK(r.resid_dropout == c.resid_dropout);
        CHECK(r.num_experts == c.num_experts);
        CHECK(r.moe_intermediate_size == c.moe_intermediate_size);
        CHECK(r.mlp_only_layers == c.mlp_only_layers);
        CHECK(r.attn_sinks == c.attn_sinks);
        CHECK(r.layer_types == (arch == model::Arch::GptOss ? "sliding,full" : ""));
        CHECK(ckpt::arch_differences(c,
                                     [&] {
                                         model::ArchConfig x = r;
                                         x.padded_vocab_size = c.padded_vocab_size;
                                         return x;
                                     }())
                  .empty());
        CHECK(r.vocab_size == 50);
        CHECK(r.padded_vocab_size == 50); // HF files have no padding rows
        // buffers start as NaN: every element must be written (values or zero padding)
        std::vector<float> full(l.num_params, std::nanf(""));
        ckpt::import_hf(d + "/out", l, zero::make_shard_map(l, 1, 0), full.data());
        CHECK(bit_equal(full, p));
        // 3 ZeRO-3 shards: each rank's import equals the slice of the full one
        for (int rank = 0; rank < 3; rank++) {
            const zero::ShardMap m = zero::make_shard_map(l, 3, rank);
            std::vector<float> mine(m.local_size, std::nanf("")), want(m.local_size);
            ckpt::import_hf(d + "/out", l, m, mine.data());
            zero::shard_scatter(l, m, p.data(), want.data());
            CHECK(bit_equal(mine, want));
        }
        // a second export into the same place is refused, nothing is lost
        expect_error([&] { ckpt::export_hf(d + "/out", l, p.data(), o); }, core::ErrorKind::Io,
                     {"not an empty directory"});
    }
    // bf16 single-file export reads back within bf16 rounding
    const model::ArchConfig c = hf_model(model::Arch::Llama);
    const model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params), got(l.num_params);
    model::init_params(l, p.data(), 0.05f, 3);
    const std::string d = ckpt_scratch("hf_bf16");
    ckpt::export_hf(d + "/m", l, p.data(), ckpt::HfExportOptions{});
    CHECK(fs::exists(d + "/m/model.safetensors"));
    ckpt::import_hf(d + "/m", l, zero::make_shard_map(l, 1, 0), got.data());
    for (size_t i = 0; i < p.size(); i++)
        REQUIRE(std::fabs(got[i] - p[i]) <= std::fabs(p[i]) * (1.0f / 256));
    // a config that disagrees with the files: missing and unexpected tensors, wrong shapes
    auto import_as = [&](const model::ArchConfig& cfg) {
        const model::ParamLayout lx = model::make_layout(cfg);
        std::vector<float> x(lx.num_params);
        ckpt::import_hf(d + "/m", lx, zero::make_shard_map(lx, 1, 0), x.data());
    };
    model::ArchConfig biased = c;
    biased.qkv_bias = true;
    expect_error([&] { import_as(biased); }, core::ErrorKind::Format,
                 {"model.layers.0.self_attn.q_proj.bias' is missing"});
    model::ArchConfig shallow = c;
    shallow.num_layers = 1;
    expect_error([&] { import_as(shallow); }, core::ErrorKind::Format,
                 {"model.safetensors", "unexpected tensor 'model.layers.1."});
    model::ArchConfig wide = c;
    wide.intermediate_size = 64;
    const model::ParamLayout lw = model::make_layout(wide);
    std::vector<float> w(lw.num_params);
    expect_error([&] { ckpt::import_hf(d + "/m", lw, zero::make_shard_map(lw, 1, 0), w.data()); },
                 core::ErrorKind::Format,
                 {"model.safetensors", "gate_proj", "[48, 32]", "[64, 32]"});
    // an architecture we do not build
    nlohmann::json j = nlohmann::json::parse(slurp(d + "/m/config.json"));
    j["architectures"] = {"DeepseekV3ForCausalLM"};
    spit(d + "/m/config.json", j.dump());
    expect_error([&] { ckpt::read_hf_config(d + "/m"); }, core::ErrorKind::Config,
                 {"config.json", "DeepseekV3ForCausalLM", "Qwen3ForCausalLM", "GptOssForCausalLM"});
    j.erase("architectures");
    j["model_type"] = "qwen3";
    j.erase("hidden_size");
    spit(d + "/m/config.json", j.dump());
    expect_error([&] { ckpt::read_hf_config(d + "/m"); }, core::ErrorKind::Format,
                 {"config.json", "hidden_size"});
}

TEST_CASE("config.json as transformers reads it: defaults, refused keys, exact decimals") {
    const std::string d = ckpt_scratch("hf_config_keys");
    auto write_config = [&](const std::string& name, const std::string& extra) {
        const std::string dir = d + "/" + name;
        fs::create_directories(dir);
        std::ofstream(dir + "/config.json")
            << "{\"architectures\": [\"" << name << "\"], \"hidden_size\": 256, "
            << "\"intermediate_size\": 512, \"num_attention_heads\": 64, "
            << "\"num_hidden_layers\": 2, \"vocab_size\": 100, "
            << "\"max_position_embeddings\": 64" << extra << "}";
        return dir;
    };
    // absent kv heads / head_dim mean transformers' defaults: Qwen 32 kv heads, Qwen3 head_dim
    // 128; Llama kv heads = heads, head_dim = C / heads
    const model::ArchConfig q3 = ckpt::read_hf_config(write_config("Qwen3ForCausalLM", ""));
    CHECK(q3.kv_heads() == 32);
    CHECK(q3.hdim() == 128);
    const model::ArchConfig q2 = ckpt::read_hf_config(write_config("Qwen2ForCausalLM", ""));
    CHECK(q2.kv_heads() == 32);
    CHECK(q2.hdim() == 4);
    const model::ArchConfig ll = ckpt::read_hf_config(write_config("LlamaForCausalLM", ""));
    CHECK(ll.kv_heads() == 64);
    CHECK(ll.hdim() == 4);
    // transformers' attention_bias on llama/qwen3 switches q/k/v and o_proj biases, mlp_bias the
    // MLP's; qwen2's window layers (max_window_layers) are not read: refused
    const model::ArchConfig lb =
        ckpt::read_hf_config(write_config("LlamaForCausalLM", ", \"attention_bias\": true, "
                                                              "\"mlp_bias\": true"));
    CHECK((lb.qkv_bias && lb.o_bias && lb.mlp_bias));
    const std::string sw = write_config("Qwen2ForCausalLM", ", \"use_sliding_window\": true");
    expect_error([&] { ckpt::read_hf_config(sw); }, core::ErrorKind::Config,
                 {"config.json", "use_sliding_window"});
    // rope_scaling as a bare string: the factors would be guesses (before: silently no scaling)
    const std::string rs = write_config("LlamaForCausalLM", ", \"rope_scaling\": \"llama3\"");
    expect_error([&] { ckpt::read_hf_config(rs); }, core::ErrorKind::Config,
                 {"config.json", "rope_scaling must be an object", "got \"llama3\""});
    // issue 29: llama3 scaling without its factor trained unscaled before; transformers refuses
    // it, and so does the import, naming the key
    expect_error(
        [&] {
            ckpt::read_hf_config(write_config("LlamaForCausalLM",
                                              ", \"rope_scaling\": {\"rope_type\": \"llama3\"}"));
        },
        core::ErrorKind::Config, {"config.json", "rope_scaling.factor is missing", "llama3"});
    // phi3: partial rotary and longrope refused naming the key; mistral's window: absent = its
    // class default 4096, null = none; seed_oss: transformers' defaults (head_dim 128, 8 kv
    // heads, dropout 0.1, q/k/v biases without an o_proj bias)
    expect_error(
        [&] {
            ckpt::read_hf_config(
                write_config("Phi3ForCausalLM", ", \"partial_rotary_factor\": 0.75"));
        },
        core::ErrorKind::Config, {"config.json", "partial_rotary_factor = 0.75"});
    expect_error(
        [&] {
            ckpt::read_hf_config(
                write_config("Phi3ForCausalLM",
                             ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1], "
                             "\"long_factor\": [1]}"));
        },
        core::ErrorKind::Config, {"config.json", "rope_type = \"longrope\"", "phi3"});
    CHECK(ckpt::read_hf_config(write_config("MistralForCausalLM", "")).sliding_window == 4096);
    CHECK(ckpt::read_hf_config(write_config("MistralForCausalLM", ", \"sliding_window\": null"))
              .sliding_window == 0);
    const model::ArchConfig seed =
        ckpt::read_hf_config(write_config("SeedOssForCausalLM", ", \"attention_bias\": true"));
    CHECK(seed.hdim() == 128);
    CHECK(seed.kv_heads() == 8);
    CHECK((seed.qkv_bias && !seed.o_bias && !seed.mlp_bias));
    CHECK(seed.attn_dropout == 0.1f);
    CHECK(seed.resid_dropout == 0.1f);
    // yarn as GPT-OSS writes it (truncate false), and the attention factor from mscale
    const model::ArchConfig y = ckpt::read_hf_config(write_config(
        "LlamaForCausalLM", ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 32.0, "
                            "\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"truncate\": false, "
                            "\"original_max_position_embeddings\": 4096, \"mscale\": 2.0, "
                            "\"mscale_all_dim\": 1.0}"));
    CHECK(y.rope_scaling.type == model::RopeScalingType::Yarn);
    CHECK_FALSE(y.rope_scaling.truncate);
    CHECK(y.rope_scaling.attention_factor ==
          doctest::Approx((0.2 * std::log(32.0) + 1) / (0.1 * std::log(32.0) + 1)));
    // export: eps as written (1e-05, not the float's 9.999999747378752e-06), no made-up token
    // ids, and features the architecture's config.json cannot express refused
    model::ArchConfig c = hf_model(model::Arch::Llama);
    c.norm_eps = 1e-5f;
    model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params, 0.0f);
    ckpt::export_hf(d + "/eps", l, p.data(), ckpt::HfExportOptions{});
    std::ifstream f(d + "/eps/config.json");
    const nlohmann::json j = nlohmann::json::parse(f);
    CHECK(j["rms_norm_eps"].get<double>() == 1e-5);
    CHECK(j["bos_token_id"].is_null());
    CHECK(j["eos_token_id"].is_null());
    c.qkv_bias = true; // llama's attention_bias switches the o_proj bias with them: refused
    l = model::make_layout(c);
    p.assign(l.num_params, 0.0f);
    expect_error([&] { ckpt::export_hf(d + "/bias", l, p.data(), ckpt::HfExportOptions{}); },
                 core::ErrorKind::Usage,
                 {"model.attention_bias = true", "llama config.json cannot express"});
    CHECK_FALSE(fs::exists(d + "/bias"));
    model::ArchConfig m = hf_model(model::Arch::Mistral); // mistral has no biases at all
    m.mlp_bias = true;
    l = model::make_layout(m);
    p.assign(l.num_params, 0.0f);
    expect_error([&] { ckpt::export_hf(d + "/mb", l, p.data(), ckpt::HfExportOptions{}); },
                 core::ErrorKind::Usage, {"model.mlp_bias = true", "mistral"});
    m = hf_model(model::Arch::Mistral); // nor a window on some layers only
    m.layer_types = "sliding,full";
    l = model::make_layout(m);
    p.assign(l.num_params, 0.0f);
    expect_error([&] { ckpt::export_hf(d + "/lt", l, p.data(), ckpt::HfExportOptions{}); },
                 core::ErrorKind::Usage, {"model.layer_types"});
    // transformers >= 5: rope_theta and the llama3 scaling inside "rope_parameters"
    const model::ArchConfig v5 = ckpt::read_hf_config(
        write_config("LlamaForCausalLM",
                     ", \"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": "
                     "\"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, "
                     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}"));
    CHECK(v5.rope_theta == 500000.0);
    CHECK(v5.rope_scaling.type == model::RopeScalingType::Llama3);
    CHECK(v5.rope_scaling.factor == 32.0);
    CHECK(v5.rope_scaling.original_max_position == 64);
    const model::ArchConfig v5d = ckpt::read_hf_config(write_config(
        "Qwen2ForCausalLM",
        ", \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}"));
    CHECK(v5d.rope_theta == 1000000.0);
    CHECK(v5d.rope_scaling.type == model::RopeScalingType::None);
    // export with a source directory: tokenizer files and generation_config.json copied, the
    // source's token ids kept
    const std::string src = d + "/src";
    fs::create_directories(src);
    std::ofstream(src + "/config.json") << "{\"bos_token_id\": 128000, \"eos_token_id\": [128001, "
                                           "128009]}";
    std::ofstream(src + "/tokenizer.json") << "{\"model\": {}}";
    std::ofstream(src + "/generation_config.json") << "{\"do_sample\": true}";
    c.qkv_bias = false;
    l = model::make_layout(c);
    p.assign(l.num_params, 0.0f);
    ckpt::HfExportOptions so;
    so.source_dir = src;
    ckpt::export_hf(d + "/with_src", l, p.data(), so);
    CHECK(fs::exists(d + "/with_src/tokenizer.json"));
    CHECK(fs::exists(d + "/with_src/generation_config.json"));
    CHECK_FALSE(fs::exists(d + "/with_src/merges.txt"));
    std::ifstream g(d + "/with_src/config.json");
    const nlohmann::json k = nlohmann::json::parse(g);
    CHECK(k["bos_token_id"] == 128000);
    CHECK(k["eos_token_id"] == nlohmann::json({128001, 128009}));
    so.source_dir = d + "/nope";
    expect_error([&] { ckpt::export_hf(d + "/no_src", l, p.data(), so); }, core::ErrorKind::Io,
                 {"nope", "--source"});
}

TEST_CASE("manifests carry the LLaMA-family fields; a resume names a changed kv-head count") {
    const std::string root = ckpt_scratch("hf_manifest");
    ckpt::Manifest m;
    m.step = 3;
    m.opt_step = 2;
    m.model = hf_model(model::Arch::Qwen3);
    m.num_params = static_cast<int64_t>(model::make_layout(m.model).num_params);
    m.world_size = 1;
    config::Config a = config::parse_deck_text("", "a.yaml");
    m.deck_yaml = config::effective_yaml(a);
    ckpt::State s;
    s.params = pattern(static_cast<size_t>(m.num_params), 1);
    s.exp_avg = s.params;
    s.exp_avg_sq = s.params;
    const std::string dir = ckpt::save(root, m, s, 2, 0, 1);
    const ckpt::Manifest g = ckpt::load_manifest(dir);
    CHECK(g.model.arch == model::Arch::Qwen3);
    CHECK(g.model.head_dim == 12);
    CHECK(g.model.qk_norm);
    CHECK(g.model.rope_theta == m.model.rope_theta);
    CHECK(g.model.intermediate_size == 48);
    model::ArchConfig now = g.model;
    CHECK(ckpt::compare_runs(g, a, now, "").empty());
    now.num_kv_heads = 4;
    std::vector<ckpt::DeckChange> ch = ckpt::compare_runs(g, a, now, "");
    REQUIRE(ch.size() == 1);
    CHECK(ch[0].key == "model.num_kv_heads");
    CHECK_FALSE(ch[0].allowed);

    // issue 26's block features round trip; a manifest written before them (without their keys)
    // reads with their defaults
    ckpt::Manifest f = m;
    f.model = hf_model(model::Arch::SeedOss);
    f.model.o_bias = f.model.mlp_bias = f.model.attn_sinks = true;
    f.model.sliding_window = 5;
    f.model.layer_types = "sliding,full";
    f.model.rope_scaling.type = model::RopeScalingType::Yarn;
    f.model.rope_scaling.beta_fast = 16;
    f.model.rope_scaling.truncate = false;
    f.model.rope_scaling.attention_factor = 1.25;
    f.num_params = static_cast<int64_t>(model::make_layout(f.model).num_params);
    const uint64_t nb = 4ull * static_cast<uint64_t>(f.num_params);
    const std::vector<ckpt::ShardRecord> one = {{0,
                                                 1,
                                                 3,
                                                 f.num_params,
                                                 false,
                                                 {"params.bin", nb, 1},
                                                 {"exp_avg.bin", nb, 2},
                                                 {"exp_avg_sq.bin", nb, 3}}};
    const std::string text = ckpt::manifest_to_json(f, {"deck.yaml", 1, 1}, one);
    ckpt::Manifest back;
    ckpt::FileEntry deck_entry;
    std::vector<ckpt::ShardRecord> shards;
    ckpt::manifest_from_json(text, "m.json", &back, &deck_entry, &shards);
    CHECK(ckpt::arch_differences(back.model, f.model).empty());
    CHECK(back.model.attn_dropout == f.model.attn_dropout);
    // an older manifest: a model without these features, written without their keys
    ckpt::Manifest q = m;
    q.model.rope_scaling.type = model::RopeScalingType::Llama3;
    const uint64_t qb = 4ull * static_cast<uint64_t>(q.num_params);
    nlohmann::json j = nlohmann::json::parse(ckpt::manifest_to_json(q, {"deck.yaml", 1, 1},
                                                                    {{0,
                                                                      1,
                                                                      3,
                                                                      q.num_params,
                                                                      false,
                                                                      {"params.bin", qb, 1},
                                                                      {"exp_avg.bin", qb, 2},
                                                                      {"exp_avg_sq.bin", qb, 3}}}));
    for (const char* k : {"o_bias", "mlp_bias", "attn_sinks", "sliding_window", "layer_types",
                          "attn_dropout", "resid_dropout"})
        j["model"].erase(k);
    for (const char* k : {"beta_fast", "beta_slow", "attention_factor", "truncate"})
        j["model"]["rope_scaling"].erase(k);
    j["model"]["rope_scaling"]["type"] = "llama3";
    j.erase("manifest_checksum");
    std::string old = j.dump(2);
    old = ckpt::seal_manifest(old.substr(0, old.size() - 2) + ",\n");
    ckpt::manifest_from_json(old, "old.json", &back, &deck_entry, &shards);
    CHECK(back.model.arch == model::Arch::Qwen3);
    CHECK(back.model.rope_scaling.type == model::RopeScalingType::Llama3);
    CHECK_FALSE((back.model.o_bias || back.model.mlp_bias || back.model.attn_sinks));
    CHECK(back.model.sliding_window == 0);
    CHECK(back.model.rope_scaling.beta_fast == 32.0);
    CHECK(back.model.rope_scaling.truncate);
}

TEST_CASE("MoE checkpoints: the hub's and transformers 5's expert names, mixtral's config") {
    const std::string d = ckpt_scratch("hf_moe");
    for (model::Arch arch : {model::Arch::Qwen3Moe, model::Arch::Mixtral}) {
        CAPTURE(model::arch_name(arch));
        const bool mx = arch == model::Arch::Mixtral;
        const model::ArchConfig c = hf_model(arch);
        const model::ParamLayout l = model::make_layout(c);
        std::vector<float> p(l.num_params);
        model::init_params(l, p.data(), 0.05f, 7);
        const std::string dir = d + "/" + model::arch_name(arch);
        ckpt::HfExportOptions o;
        o.dtype = "fp32";
        ckpt::export_hf(dir + "/hub", l, p.data(), o);
        const std::string blk = mx ? "model.layers.1.block_sparse_moe." : "model.layers.1.mlp.";
        {
            ckpt::SafetensorsFile hub(dir + "/hub/model.safetensors");
            CHECK(hub.find(blk + "gate.weight"));
            CHECK(hub.find(blk + (mx ? "experts.3.w1.weight" : "experts.3.gate_proj.weight")));
            CHECK(hub.find(blk + (mx ? "experts.3.w3.weight" : "experts.3.up_proj.weight")));
            CHECK(hub.find(blk + (mx ? "experts.3.w2.weight" : "experts.3.down_proj.weight")));
            CHECK_FALSE(hub.find("model.layers.1.mlp.experts.gate_up_proj"));
        }
        // the same weights under transformers 5's fused names (save_original_format=False):
        // the router is mlp.gate whatever the hub's block is called
        std::vector<ckpt::SafetensorsOut> fused;
        for (const model::HfTensor& t : model::hf_tensors(l, true))
            fused.push_back({t.name, t.shape, p.data() + t.offset});
        fs::create_directories(dir + "/fused");
        fs::copy_file(dir + "/hub/config.json", dir + "/fused/config.json");
        ckpt::write_safetensors(dir + "/fused/model.safetensors", fused, false);
        {
            ckpt::SafetensorsFile f(dir + "/fused/model.safetensors");
            CHECK(f.find("model.layers.1.mlp.gate.weight"));
            CHECK(f.find("model.layers.1.mlp.experts.gate_up_proj"));
            CHECK(f.find("model.layers.1.mlp.experts.down_proj"));
        }
        for (const char* src : {"/hub", "/fused"}) {
            CAPTURE(src);
            std::vector<float> full(l.num_params, std::nanf(""));
            ckpt::import_hf(dir + src, l, zero::make_shard_map(l, 1, 0), full.data());
            CHECK(bit_equal(full, p));
            for (int rank = 0; rank < 3; rank++) { // ZeRO-3 slices cut across the experts
                const zero::ShardMap m = zero::make_shard_map(l, 3, rank);
                std::vector<float> mine(m.local_size, std::nanf("")), want(m.local_size);
                ckpt::import_hf(dir + src, l, m, mine.data());
                zero::shard_scatter(l, m, p.data(), want.data());
                CHECK(bit_equal(mine, want));
            }
        }
    }
    // mixtral's config.json: MixtralConfig's defaults (8 experts, top 2, the experts as wide as
    // intermediate_size, rope theta 1e6, no window, 8 kv heads, eps 1e-5), every layer sparse
    // and renormalized; a nonzero router_jitter_noise refused naming the key and the value
    auto write = [&](const std::string& name, const std::string& extra) {
        fs::create_directories(d + "/" + name);
        std::ofstream(d + "/" + name + "/config.json")
            << "{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 256, "
            << "\"intermediate_size\": 512, \"num_attention_heads\": 16, "
            << "\"num_hidden_layers\": 2, \"vocab_size\": 100, "
            << "\"max_position_embeddings\": 64" << extra << "}";
        return d + "/" + name;
    };
    const model::ArchConfig m = ckpt::read_hf_config(write("defaults", ""));
    CHECK(m.arch == model::Arch::Mixtral);
    CHECK(m.num_experts == 8);
    CHECK(m.experts_per_tok == 2);
    CHECK(m.moe_intermediate_size == 512);
    CHECK(m.norm_topk_prob);
    CHECK(m.rope_theta == 1e6);
    CHECK(m.sliding_window == 0);
    CHECK(m.kv_heads() == 8);
    CHECK(m.norm_eps == 1e-5f);
    CHECK((m.sparse_layer(0) && m.sparse_layer(1)));
    const std::string jit = write("jitter", ", \"router_jitter_noise\": 0.01");
    expect_error([&] { ckpt::read_hf_config(jit); }, core::ErrorKind::Config,
                 {"config.json", "router_jitter_noise = 0.01", "set it to 0.0"});
    CHECK(ckpt::read_hf_config(write("nojitter", ", \"router_jitter_noise\": 0.0, "
                                                 "\"num_local_experts\": 4, \"sliding_window\": 9"))
              .num_experts == 4);
    // the deck: the experts' width defaults to intermediate_size, another width is refused
    config::Config deck;
    deck.model.type = model::Arch::Mixtral;
    deck.model.intermediate_size = 64;
    deck.model.num_experts = 4;
    deck.model.num_experts_per_tok = 2;
    const model::ArchConfig dm = model::config_for(deck.model);
    CHECK(dm.moe_intermediate_size == 64);
    CHECK(dm.norm_topk_prob);
    model::ArchConfig wrong = dm;
    wrong.moe_intermediate_size = 32;
    expect_error([&] { model::validate(wrong); }, core::ErrorKind::Config,
                 {"model.moe_intermediate_size = 32", "model.intermediate_size = 64", "mixtral"});
}

TEST_CASE("GPT-OSS checkpoints: transposed experts, biases, config.json defaults") {
    const std::string d = ckpt_scratch("hf_gptoss");
    const model::ArchConfig c = hf_model(model::Arch::GptOss);
    const model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params);
    model::init_params(l, p.data(), 0.05f, 9);
    for (float& v : p) // the biases too (their init is zero)
        v += 0.01f;
    ckpt::HfExportOptions o;
    o.dtype = "fp32";
    ckpt::export_hf(d + "/m", l, p.data(), o);
    // the files hold transformers' (E, C, 2I) gate_up_proj: element [e, x, r] = ours [e, r, x]
    const model::TensorInfo* gu = nullptr;
    for (const model::TensorInfo& t : l.tensors)
        if (t.layer == 1 && t.kind == model::TensorKind::ExpGateUp) gu = &t;
    REQUIRE(gu != nullptr);
    const int E = 4, R = 2 * 48, X = 32;
    REQUIRE(gu->shape == std::vector<int>{E, R, X});
    ckpt::SafetensorsFile f(d + "/m/model.safetensors");
    const ckpt::SafetensorsFile::Tensor* st = f.find("model.layers.1.mlp.experts.gate_up_proj");
    REQUIRE(st != nullptr);
    CHECK(st->shape == std::vector<int64_t>{E, X, R});
    std::vector<float> file(st->numel);
    f.read_f32(*st, 0, st->numel, file.data());
    for (int e : {0, 3})
        for (int r : {0, 1, 95})
            for (int x : {0, 31})
                CHECK(file[(static_cast<size_t>(e) * X + x) * R + r] ==
                      p[gu->offset + (static_cast<size_t>(e) * R + r) * X + x]);
    for (const char* n :
         {"model.layers.0.mlp.router.weight", "model.layers.0.mlp.router.bias",
          "model.layers.0.mlp.experts.gate_up_proj_bias", "model.layers.0.mlp.experts.down_proj",
          "model.layers.0.mlp.experts.down_proj_bias", "model.layers.0.self_attn.sinks",
          "model.layers.0.self_attn.o_proj.bias"})
        CHECK_MESSAGE(f.find(n), n);
    // config.json: rope_parameters (yarn, truncate false), layer_types, biases, the clamp's keys
    const nlohmann::json j = nlohmann::json::parse(slurp(d + "/m/config.json"));
    CHECK(j["rope_parameters"]["rope_type"] == "yarn");
    CHECK(j["rope_parameters"]["rope_theta"] == 150000.0);
    CHECK(j["layer_types"] == nlohmann::json({"sliding_attention", "full_attention"}));
    CHECK(j["attention_bias"] == true);
    CHECK(j["swiglu_limit"] == 7.0);
    // GptOssConfig's defaults of absent keys: biases on, theta 150000, its yarn, sliding and full
    // layers alternating with a window of 128, 128 experts top 4 as wide as intermediate_size
    nlohmann::json m = j;
    for (const char* k : {"attention_bias", "rope_parameters", "layer_types", "sliding_window",
                          "num_local_experts", "num_experts_per_tok", "head_dim"})
        m.erase(k);
    m["num_hidden_layers"] = 3;
    m["num_attention_heads"] = 4;
    m["hidden_size"] = 256;
    fs::create_directories(d + "/defaults");
    spit(d + "/defaults/config.json", m.dump());
    const model::ArchConfig g = ckpt::read_hf_config(d + "/defaults");
    CHECK((g.qkv_bias && g.o_bias && g.attn_sinks));
    CHECK(g.rope_theta == 150000.0);
    CHECK(g.rope_scaling.type == model::RopeScalingType::Yarn);
    CHECK(g.rope_scaling.factor == 32.0);
    CHECK_FALSE(g.rope_scaling.truncate);
    CHECK(g.sliding_window == 128);
    CHECK(g.layer_types == "sliding,full,sliding");
    CHECK(g.num_experts == 128);
    CHECK(g.experts_per_tok == 4);
    CHECK(g.moe_intermediate_size == g.intermediate_size);
    CHECK(g.hdim() == 64);
    m["swiglu_limit"] = 8.0;
    spit(d + "/defaults/config.json", m.dump());
    expect_error([&] { ckpt::read_hf_config(d + "/defaults"); }, core::ErrorKind::Config,
                 {"config.json", "swiglu_limit = 8"});
    m.erase("swiglu_limit");
    m["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"};
    spit(d + "/defaults/config.json", m.dump());
    expect_error([&] { ckpt::read_hf_config(d + "/defaults"); }, core::ErrorKind::Config,
                 {"config.json", "layer_types[1]", "chunked_attention"});
}
