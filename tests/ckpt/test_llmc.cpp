// llm.c GPT-2 fp32 files: export then import is bit-exact, the tensor-major file order is checked
// against hand-placed values, and bad headers (magic, version, dims, truncation) name the file.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "ckpt/llmc.h"
#include "ckpt_test_util.h"

using namespace sof;
using namespace sof::test;
using model::TensorKind;
namespace fs = std::filesystem;

namespace {

model::ArchConfig small_model() {
    model::ArchConfig c;
    c.max_seq_len = 8;
    c.vocab_size = 30;
    c.padded_vocab_size = 32;
    c.num_layers = 3;
    c.num_heads = 2;
    c.channels = 8;
    return c;
}

std::vector<int32_t> read_header(const std::string& path) {
    std::string bytes = slurp(path);
    REQUIRE(bytes.size() >= 1024);
    std::vector<int32_t> h(256);
    std::memcpy(h.data(), bytes.data(), 1024);
    return h;
}

float read_float(const std::string& path, size_t index) {
    std::string bytes = slurp(path);
    REQUIRE(bytes.size() >= 1024 + 4 * (index + 1));
    float f;
    std::memcpy(&f, bytes.data() + 1024 + 4 * index, 4);
    return f;
}

void write_header_file(const std::string& path, const std::vector<int32_t>& h, size_t floats) {
    std::string bytes(1024 + 4 * floats, '\0');
    std::memcpy(bytes.data(), h.data(), 1024);
    spit(path, bytes);
}

std::vector<int32_t> header_for(const model::ArchConfig& c) {
    std::vector<int32_t> h(256, 0);
    h[0] = 20240326;
    h[1] = 3;
    h[2] = c.max_seq_len;
    h[3] = c.vocab_size;
    h[4] = c.num_layers;
    h[5] = c.num_heads;
    h[6] = c.channels;
    h[7] = c.padded_vocab_size;
    return h;
}

} // namespace

TEST_CASE("llm.c export then import is bit-exact; header fields") {
    std::string d = ckpt_scratch("llmc_roundtrip");
    model::ArchConfig cfg = small_model();
    model::ParamLayout lay = model::make_layout(cfg);
    std::vector<float> x = pattern(lay.num_params, 42);
    const std::string path = d + "/model.bin";
    ckpt::export_llmc(path, cfg, lay, x.data());
    CHECK_FALSE(fs::exists(path + ".tmp"));
    CHECK(fs::file_size(path) == 1024 + 4 * lay.num_params);
    CHECK(ckpt::llmc_param_count(cfg) == static_cast<double>(lay.num_params));

    std::vector<int32_t> h = read_header(path);
    CHECK(h == header_for(cfg));

    model::ArchConfig got = ckpt::read_llmc_header(path);
    CHECK(got.max_seq_len == cfg.max_seq_len);
    CHECK(got.vocab_size == cfg.vocab_size);
    CHECK(got.padded_vocab_size == cfg.padded_vocab_size);
    CHECK(got.num_layers == cfg.num_layers);
    CHECK(got.num_heads == cfg.num_heads);
    CHECK(got.channels == cfg.channels);

    std::vector<float> y(lay.num_params, 0.0f);
    ckpt::import_llmc(path, lay, y.data());
    CHECK(bit_equal(x, y));
}

TEST_CASE("llm.c file order is tensor-major: hand-placed values land where llm.c expects them") {
    std::string d = ckpt_scratch("llmc_order");
    model::ArchConfig cfg = small_model();
    model::ParamLayout lay = model::make_layout(cfg);
    const size_t C = 8, L = 3, Vp = 32, maxT = 8;
    std::vector<float> x(lay.num_params, 0.0f);
    // our layout: block 1's qkvw element (row 5, col 2) and block 2's fcprojb[3], lnfb[7]
    x[lay.offset_of(TensorKind::Qkvw, 1) + 5 * C + 2] = 1.5f;
    x[lay.offset_of(TensorKind::Fcprojb, 2) + 3] = -2.25f;
    x[lay.offset_of(TensorKind::Lnfb, -1) + 7] = 3.0f;
    x[lay.offset_of(TensorKind::Ln1w, 0)] = 4.0f;
    const std::string path = d + "/order.bin";
    ckpt::export_llmc(path, cfg, lay, x.data());

    // llm.c offsets computed by hand from its tensor list
    const size_t wte = Vp * C, wpe = maxT * C;
    const size_t ln1w = wte + wpe, ln1b = ln1w + L * C, qkvw = ln1b + L * C;
    const size_t qkvb = qkvw + L * 3 * C * C, attprojw = qkvb + L * 3 * C;
    const size_t attprojb = attprojw + L * C * C, ln2w = attprojb + L * C, ln2b = ln2w + L * C;
    const size_t fcw = ln2b + L * C, fcb = fcw + L * 4 * C * C, fcprojw = fcb + L * 4 * C;
    const size_t fcprojb = fcprojw + L * C * 4 * C, lnfw = fcprojb + L * C, lnfb = lnfw + C;
    CHECK(lnfb + C == lay.num_params);
    CHECK(read_float(path, qkvw + 1 * 3 * C * C + 5 * C + 2) == 1.5f);
    CHECK(read_float(path, fcprojb + 2 * C + 3) == -2.25f);
    CHECK(read_float(path, lnfb + 7) == 3.0f);
    CHECK(read_float(path, ln1w) == 4.0f);
    CHECK(ckpt::llmc_offset(cfg, TensorKind::Qkvw, 1) == qkvw + 3 * C * C);
    CHECK(ckpt::llmc_offset(cfg, TensorKind::Attprojb, 2) == attprojb + 2 * C);
    CHECK(ckpt::llmc_offset(cfg, TensorKind::Fcw, 0) == fcw);
    CHECK(ckpt::llmc_offset(cfg, TensorKind::Lnfw, 0) == lnfw);
    // every nonzero of the file is one of the four placed values
    size_t nonzero = 0;
    for (size_t i = 0; i < lay.num_params; i++)
        if (read_float(path, i) != 0.0f) nonzero++;
    CHECK(nonzero == 4);

    // and the reverse: a value placed in the file by hand imports into our layout
    std::string bytes = slurp(path);
    float v = 7.0f;
    std::memcpy(bytes.data() + 1024 + 4 * (fcw + 2 * 4 * C * C + 9), &v, 4);
    spit(path, bytes);
    std::vector<float> y(lay.num_params, 0.0f);
    ckpt::import_llmc(path, lay, y.data());
    CHECK(y[lay.offset_of(TensorKind::Fcw, 2) + 9] == 7.0f);
}

TEST_CASE("llm.c import refuses a non-finite weight, naming the tensor and its first bad index") {
    std::string d = ckpt_scratch("llmc_nonfinite");
    model::ArchConfig cfg = small_model();
    model::ParamLayout lay = model::make_layout(cfg);
    std::vector<float> x(lay.num_params, 0.5f);
    const size_t C = static_cast<size_t>(cfg.channels);
    x[lay.offset_of(TensorKind::Fcw, 1) + 6 * C + 5] = std::nanf(""); // h1.fcw [6, 5]
    const std::string path = d + "/nan.bin";
    ckpt::export_llmc(path, cfg, lay, x.data());
    std::vector<float> y(lay.num_params);
    expect_error([&] { ckpt::import_llmc(path, lay, y.data()); }, core::ErrorKind::Format,
                 {"nan.bin", "h1.fcw", "non-finite", "[6, 5]"});
}

TEST_CASE("llm.c header errors name the file and the reason") {
    std::string d = ckpt_scratch("llmc_errors");
    model::ArchConfig cfg = small_model();
    model::ParamLayout lay = model::make_layout(cfg);
    const std::string p = d + "/bad.bin";
    auto header_error = [&](core::ErrorKind kind, const std::vector<std::string>& needles) {
        expect_error([&] { ckpt::read_llmc_header(p); }, kind, needles);
        std::vector<float> y(lay.num_params);
        expect_error([&] { ckpt::import_llmc(p, lay, y.data()); }, kind, needles);
    };

    header_error(core::ErrorKind::Io, {p, "not found"});

    std::vector<int32_t> h = header_for(cfg);
    h[0] = 20240520; // a token shard's magic
    write_header_file(p, h, lay.num_params);
    header_error(core::ErrorKind::Format, {p, "magic 20240520", "20240326"});

    h = header_for(cfg);
    h[1] = 5;
    write_header_file(p, h, lay.num_params);
    header_error(core::ErrorKind::Format, {p, "version 5"});

    h = header_for(cfg);
    write_header_file(p, h, lay.num_params - 1); // truncated
    header_error(core::ErrorKind::Format, {p, "truncated"});

    spit(p, std::string(100, 'x')); // shorter than the header
    header_error(core::ErrorKind::Format, {p, "1024"});

    h = header_for(cfg);
    h[6] = 7; // channels not divisible by heads
    write_header_file(p, h, 10);
    header_error(core::ErrorKind::Format, {p, "channels"});

    h = header_for(cfg);
    h[4] = 2000000000; // absurd layer count: the bound, before any size arithmetic
    write_header_file(p, h, 10);
    header_error(core::ErrorKind::Format, {p, "model.num_layers = 2000000000", "65536"});
    h[4] = 4; // a plausible one the file is too short for
    write_header_file(p, h, 10);
    header_error(core::ErrorKind::Format, {p, "bytes"});

    h = header_for(cfg);
    h[4] = -1;
    write_header_file(p, h, 10);
    header_error(core::ErrorKind::Format, {p, "num_layers"});

    // a valid file for a different architecture cannot be imported into this layout
    model::ArchConfig other = cfg;
    other.num_layers = 2;
    model::ParamLayout olay = model::make_layout(other);
    std::vector<float> ox(olay.num_params, 1.0f);
    ckpt::export_llmc(p, other, olay, ox.data());
    std::vector<float> y(lay.num_params);
    expect_error([&] { ckpt::import_llmc(p, lay, y.data()); }, core::ErrorKind::Format,
                 {p, "num_layers = 2", "num_layers = 3"});

    // export into a directory that does not exist
    expect_error([&] { ckpt::export_llmc(d + "/no/such/dir/m.bin", cfg, lay, y.data()); },
                 core::ErrorKind::Io, {"no/such/dir"});
}

TEST_CASE("random llm.c header values give core::Error or a consistent config") {
    std::string d = ckpt_scratch("llmc_fuzz");
    model::ArchConfig cfg = small_model();
    const std::string p = d + "/fuzz.bin";
    uint32_t x = 777;
    auto rnd = [&] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    };
    const int32_t specials[] = {0, -1, 1, 2147483647, -2147483647 - 1, 3, 8, 65536};
    for (int i = 0; i < 200; i++) {
        std::vector<int32_t> h = header_for(cfg);
        int field = 2 + static_cast<int>(rnd() % 6);
        h[field] = (rnd() & 1) ? specials[rnd() % 8] : static_cast<int32_t>(rnd());
        write_header_file(p, h, 1000 + rnd() % 5000);
        try {
            model::ArchConfig got = ckpt::read_llmc_header(p);
            // accepted only when the file size matches the dims exactly
            CHECK(fs::file_size(p) ==
                  1024 + 4 * static_cast<uintmax_t>(ckpt::llmc_param_count(got)));
        } catch (const core::Error& e) {
            CHECK(std::string(e.what()).find(p) != std::string::npos);
        }
    }
}
