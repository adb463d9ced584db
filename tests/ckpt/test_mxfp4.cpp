// MXFP4 (ckpt/mxfp4.h) and U8 safetensors tensors: the E2M1 table, nibble order and scales on
// hand-made bytes, and the errors (scale 255, shapes, dtypes, read_f32 of a U8 tensor). The
// comparison with transformers' own dequantization is tests/kernels/moe_reference.py.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "ckpt/mxfp4.h"
#include "ckpt/safetensors.h"
#include "ckpt_test_util.h"
#include "model/block_spec.h"
#include "model/model.h"

using namespace sof;
using namespace sof::test;

namespace {

void write_raw(const std::string& path, const std::string& header, const std::string& data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << data;
}

// One (1, 2, 1, 2) blocks tensor "w_blocks" (2 rows of 1 group of 2 bytes = 4 values) and its
// (1, 2, 1) scales, with the given bytes.
std::string mxfp4_file(const std::string& dir, const std::string& blocks, const std::string& scales,
                       const char* scale_shape = "[1,2,1]") {
    const std::string p = dir + "/w.safetensors";
    const std::string h = std::string(R"({"w_blocks":{"dtype":"U8","shape":[1,2,1,2],)") +
                          R"("data_offsets":[0,4]},"w_scales":{"dtype":"U8","shape":)" +
                          scale_shape + R"(,"data_offsets":[4,6]}})";
    write_raw(p, h, blocks + scales);
    return p;
}

} // namespace

TEST_CASE("mxfp4: E2M1 codes, low nibble first, scale 2^(s - 127)") {
    const std::string d = ckpt_scratch("mxfp4");
    // row 0: bytes 0x21 (codes 1, 2: 0.5, 1.0), 0xF7 (codes 7, 15: 6, -6), scale 128 (x 2)
    // row 1: bytes 0x98 (codes 8, 9: -0, -0.5), 0x03 (3, 0: 1.5, 0), scale 0 (x 2^-127)
    const std::string p =
        mxfp4_file(d, std::string("\x21\xF7\x98\x03", 4), std::string("\x80\x00", 2));
    ckpt::SafetensorsFile f(p);
    std::vector<int64_t> shape;
    const std::vector<float> v = ckpt::read_mxfp4(f, "w", &shape);
    CHECK(shape == std::vector<int64_t>{1, 2, 4});
    const float tiny = std::ldexp(1.0f, -127);
    const std::vector<float> want = {1.0f,  2.0f,         12.0f,       -12.0f,
                                     -0.0f, -0.5f * tiny, 1.5f * tiny, 0.0f};
    CHECK(bit_equal(v, want));
    CHECK(std::signbit(v[4])); // -0 stays -0
    // the table is transformers' FP4_VALUES
    CHECK(ckpt::kE2M1Values[7] == 6.0f);
    CHECK(ckpt::kE2M1Values[13] == -3.0f);
    // swapped nibbles would give another first value: the test can fail
    CHECK(v[0] != ckpt::kE2M1Values[2] * 2.0f);
    // a U8 tensor has no fp32 values
    std::vector<float> out(4);
    expect_error([&] { f.read_f32(*f.find("w_blocks"), 0, 4, out.data()); },
                 core::ErrorKind::Format, {"w.safetensors", "w_blocks", "U8", "read_u8"});
    std::vector<uint8_t> bytes(2);
    f.read_u8(*f.find("w_scales"), 0, 2, bytes.data());
    CHECK(bytes == std::vector<uint8_t>{0x80, 0x00});
}

TEST_CASE("mxfp4: errors name the file, the tensors and what does not match") {
    const std::string d = ckpt_scratch("mxfp4_errors");
    std::vector<int64_t> shape;
    {
        const std::string p = mxfp4_file(d, std::string(4, '\x11'), std::string("\x7f\xff", 2));
        ckpt::SafetensorsFile f(p);
        expect_error([&] { ckpt::read_mxfp4(f, "w", &shape); }, core::ErrorKind::Format,
                     {"w.safetensors", "'w'", "scale 255", "row 1, group 0"});
        expect_error([&] { ckpt::read_mxfp4(f, "v", &shape); }, core::ErrorKind::Format,
                     {"w.safetensors", "v_blocks", "v_scales"});
    }
    {
        const std::string p =
            mxfp4_file(d, std::string(4, '\x11'), std::string("\x7f\x7f", 2), "[2,1]");
        ckpt::SafetensorsFile f(p);
        expect_error([&] { ckpt::read_mxfp4(f, "w", &shape); }, core::ErrorKind::Format,
                     {"w_blocks", "(1, 2, 1, 2)", "w_scales", "(2, 1)", "without its last axis"});
    }
    {
        const std::string p = d + "/bf.safetensors";
        write_raw(p,
                  R"({"w_blocks":{"dtype":"BF16","shape":[1,1,1,2],"data_offsets":[0,4]},)"
                  R"("w_scales":{"dtype":"U8","shape":[1,1,1],"data_offsets":[4,5]}})",
                  std::string(5, '\0'));
        ckpt::SafetensorsFile f(p);
        expect_error([&] { ckpt::read_mxfp4(f, "w", &shape); }, core::ErrorKind::Format,
                     {"bf.safetensors", "w_blocks' is BF16", "U8"});
    }
}

TEST_CASE("mxfp4: a GPT-OSS directory with quantized experts imports dequantized") {
    // a tiny gpt_oss (experts 64 wide: every expert row a whole number of 32-value groups)
    model::ArchConfig c;
    c.arch = model::Arch::GptOss;
    model::apply_arch_defaults(&c);
    c.max_seq_len = 32;
    c.vocab_size = c.padded_vocab_size = 50;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.channels = 32;
    c.head_dim = 8;
    c.intermediate_size = c.moe_intermediate_size = 64;
    c.num_experts = 3;
    c.experts_per_tok = 2;
    c.norm_topk_prob = c.qkv_bias = c.o_bias = true;
    const model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params);
    model::init_params(l, p.data(), 0.05f, 4);
    const std::string d = ckpt_scratch("mxfp4_gptoss");
    std::filesystem::create_directories(d + "/q");
    ckpt::HfExportOptions o;
    o.dtype = "fp32";
    ckpt::export_hf(d + "/plain", l, p.data(), o);
    std::filesystem::copy_file(d + "/plain/config.json", d + "/q/config.json");
    // the other tensors as they are; each expert tensor as random blocks and scales, and the
    // weights it must import as (mxfp4_dequantize: our (E, R, X) layout)
    std::vector<ckpt::SafetensorsOut> plain;
    nlohmann::json head, wm;
    std::string bytes;
    std::vector<float> want = p;
    uint32_t rng = 12345;
    auto next = [&] { return (rng = rng * 1664525u + 1013904223u) >> 24; };
    for (const model::HfTensor& t : model::hf_tensors(l)) {
        if (!t.transposed) {
            plain.push_back({t.name, t.shape, p.data() + t.offset});
            wm[t.name] = "model-00001-of-00002.safetensors";
            continue;
        }
        const size_t E = static_cast<size_t>(t.shape[0]), X = static_cast<size_t>(t.shape[1]),
                     R = static_cast<size_t>(t.shape[2]), G = X / 32;
        std::string blocks(E * R * G * 16, '\0'), scales(E * R * G, '\0');
        for (char& b : blocks)
            b = static_cast<char>(next());
        for (char& x : scales)
            x = static_cast<char>(120 + next() % 10);
        ckpt::mxfp4_dequantize(reinterpret_cast<const uint8_t*>(blocks.data()),
                               reinterpret_cast<const uint8_t*>(scales.data()), E * R, G, 16,
                               want.data() + t.offset, t.name);
        const size_t at = bytes.size();
        head[t.name + "_blocks"] = {
            {"dtype", "U8"}, {"shape", {E, R, G, 16}}, {"data_offsets", {at, at + blocks.size()}}};
        head[t.name + "_scales"] = {
            {"dtype", "U8"},
            {"shape", {E, R, G}},
            {"data_offsets", {at + blocks.size(), at + blocks.size() + scales.size()}}};
        bytes += blocks + scales;
        wm[t.name + "_blocks"] = wm[t.name + "_scales"] = "model-00002-of-00002.safetensors";
    }
    ckpt::write_safetensors(d + "/q/model-00001-of-00002.safetensors", plain, false);
    write_raw(d + "/q/model-00002-of-00002.safetensors", head.dump(), bytes);
    spit(d + "/q/model.safetensors.index.json", nlohmann::json{{"weight_map", wm}}.dump());
    std::vector<float> got(l.num_params, std::nanf(""));
    ckpt::import_hf(d + "/q", l, zero::make_shard_map(l, 1, 0), got.data());
    CHECK(bit_equal(got, want));
    CHECK_FALSE(bit_equal(got, p)); // the experts are the dequantized values
    for (int rank = 0; rank < 3; rank++) {
        const zero::ShardMap m = zero::make_shard_map(l, 3, rank);
        std::vector<float> mine(m.local_size, std::nanf("")), slice(m.local_size);
        ckpt::import_hf(d + "/q", l, m, mine.data());
        zero::shard_scatter(l, m, want.data(), slice.data());
        CHECK(bit_equal(mine, slice));
    }
}
