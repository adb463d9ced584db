// Corrupt checkpoints: truncated, flipped byte, missing file, bad or edited manifest, wrong
// num_params. Each load fails with a core::Error naming the exact file; none crashes.
#include <doctest/doctest.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/manifest.h"
#include "ckpt_test_util.h"

using namespace sof;
using namespace sof::test;
namespace fs = std::filesystem;

namespace {

// A fresh valid checkpoint; returns its directory.
std::string make_ckpt(const std::string& name) {
    std::string root = ckpt_scratch(name);
    ckpt::Manifest m;
    m.step = 7;
    m.opt_step = 7;
    m.model.max_seq_len = 4;
    m.model.vocab_size = 10;
    m.model.padded_vocab_size = 16;
    m.model.num_layers = 2;
    m.model.num_heads = 2;
    m.model.channels = 8;
    m.num_params = static_cast<int64_t>(model::make_layout(m.model).num_params);
    m.deck_yaml = "train:\n  steps: 7\n";
    ckpt::State s;
    s.params = pattern(static_cast<size_t>(m.num_params), 1);
    s.exp_avg = pattern(static_cast<size_t>(m.num_params), 2);
    s.exp_avg_sq = pattern(static_cast<size_t>(m.num_params), 3);
    return ckpt::save(root, m, s, 0, 0, 1);
}

void expect_load_error(const std::string& dir, core::ErrorKind kind,
                       const std::vector<std::string>& needles) {
    ckpt::Manifest m;
    ckpt::State s;
    expect_error([&] { ckpt::load(dir, &m, &s, 0, 1); }, kind, needles);
}

// Recomputes manifest_checksum after an edit, so that the edit reaches the field checks.
std::string reseal(const std::string& text) {
    size_t key = text.rfind("  \"manifest_checksum\"");
    REQUIRE(key != std::string::npos);
    return ckpt::seal_manifest(text.substr(0, key));
}

// Replaces the first occurrence of `from` in the manifest by `to` (and reseals it).
void edit_manifest(const std::string& dir, const std::string& from, const std::string& to,
                   bool keep_checksum_valid = true) {
    std::string text = slurp(dir + "/manifest.json");
    size_t at = text.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, "manifest has no '" << from << "'");
    text.replace(at, from.size(), to);
    spit(dir + "/manifest.json", keep_checksum_valid ? reseal(text) : text);
}

} // namespace

TEST_CASE("truncated shard file") {
    std::string dir = make_ckpt("err_truncated");
    fs::resize_file(dir + "/exp_avg.bin", 1000);
    expect_load_error(dir, core::ErrorKind::Format, {dir + "/exp_avg.bin", "1000 bytes"});
}

TEST_CASE("flipped byte: checksum mismatch names the file") {
    for (const char* file : {"params.bin", "exp_avg.bin", "exp_avg_sq.bin"}) {
        std::string dir = make_ckpt("err_flip");
        flip_byte(dir + "/" + file, 2000);
        expect_load_error(dir, core::ErrorKind::Format,
                          {dir + "/" + file, "checksum mismatch", "another checkpoint"});
    }
    std::string dir = make_ckpt("err_flip_deck");
    flip_byte(dir + "/deck.yaml", 3);
    expect_load_error(dir, core::ErrorKind::Format, {dir + "/deck.yaml"});
}

TEST_CASE("missing files") {
    std::string dir = make_ckpt("err_missing");
    fs::remove(dir + "/exp_avg_sq.bin");
    expect_load_error(dir, core::ErrorKind::Io, {dir + "/exp_avg_sq.bin", "not found"});

    dir = make_ckpt("err_missing_deck");
    fs::remove(dir + "/deck.yaml");
    expect_load_error(dir, core::ErrorKind::Io, {dir + "/deck.yaml"});

    dir = make_ckpt("err_missing_manifest");
    fs::remove(dir + "/manifest.json");
    expect_load_error(dir, core::ErrorKind::Io, {dir + "/manifest.json"});

    expect_load_error(dir + "/nowhere", core::ErrorKind::Io, {"nowhere", "not found"});
}

TEST_CASE("bad manifests: syntax, types, missing keys, versions") {
    std::string dir = make_ckpt("err_manifest");
    const std::string mpath = dir + "/manifest.json";
    const std::string good = slurp(mpath);

    spit(mpath, good.substr(0, good.size() / 2)); // cut in the middle
    expect_load_error(dir, core::ErrorKind::Format, {mpath});

    spit(mpath, "");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "end of file"});

    spit(mpath, std::string(100, '['));
    expect_load_error(dir, core::ErrorKind::Format, {mpath});

    std::string binary(300, '\0');
    for (size_t i = 0; i < binary.size(); i++)
        binary[i] = static_cast<char>(i * 37);
    spit(mpath, binary);
    expect_load_error(dir, core::ErrorKind::Format, {mpath});

    // any edit without the matching manifest_checksum: e.g. a counter that would silently
    // change the resumed run
    spit(mpath, good);
    edit_manifest(dir, "\"skips\": 0", "\"skips\": 1", false);
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "manifest_checksum", "edited"});
    spit(mpath, good);
    edit_manifest(dir, "\"manifest_checksum\"", "\"manifest_checksun\"", false);
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "manifest_checksum"});

    spit(mpath, good);
    edit_manifest(dir, "\"step\": 7", "\"step\": \"seven\"");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "\"step\"", "integer"});

    spit(mpath, good);
    edit_manifest(dir, "\"opt_step\": 7,", "");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "missing key \"opt_step\""});

    spit(mpath, good);
    edit_manifest(dir, "\"format_version\": 1", "\"format_version\": 9");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "version 9", "newer"});

    spit(mpath, good);
    edit_manifest(dir, "superoffload-checkpoint", "something-else");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "something-else"});

    spit(mpath, good);
    edit_manifest(dir, "\"channels\": 8", "\"channels\": 7");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "channels"});

    spit(mpath, good);
    edit_manifest(dir, "\"train_data\": \"", "\"train_data\": \"garbage ");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "train_data"});

    spit(mpath, good);
    edit_manifest(dir, "\"file\": \"params.bin\"", "\"file\": \"../params.bin\"");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "../params.bin"});

    spit(mpath, good);
    edit_manifest(dir, "\"checksum\": \"", "\"checksum\": \"zz");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "checksum"});

    spit(mpath, good);
    edit_manifest(dir, "fnv1a64-blocks-64MiB", "crc32");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "crc32"});

    spit(mpath, good + "trailing");
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "after the end"});
}

TEST_CASE("wrong num_params: manifest vs model dims vs file sizes") {
    std::string dir = make_ckpt("err_numparams");
    const std::string mpath = dir + "/manifest.json";
    ckpt::Manifest m = ckpt::load_manifest(dir);
    const std::string n = std::to_string(m.num_params);
    const std::string good = slurp(mpath);

    edit_manifest(dir, "\"num_params\": " + n,
                  "\"num_params\": " + std::to_string(m.num_params + 1));
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "num_params"});

    // consistent manifest edit (numel and bytes) that no longer matches the file on disk
    spit(mpath, good);
    const std::string bytes = std::to_string(m.num_params * 4);
    const std::string bytes_less = std::to_string((m.num_params - 1) * 4);
    std::string text = good;
    text.replace(text.find("\"numel\": " + n), ("\"numel\": " + n).size(),
                 "\"numel\": " + std::to_string(m.num_params - 1));
    for (int k = 0; k < 3; k++)
        text.replace(text.find("\"bytes\": " + bytes), ("\"bytes\": " + bytes).size(),
                     "\"bytes\": " + bytes_less);
    spit(mpath, reseal(text));
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "num_params"});

    // numel and bytes disagree inside the manifest
    spit(mpath, good);
    edit_manifest(dir, "\"bytes\": " + bytes, "\"bytes\": " + bytes_less);
    expect_load_error(dir, core::ErrorKind::Format, {mpath, "params.bin"});

    // a file longer than the manifest says
    spit(mpath, good);
    {
        std::ofstream f(dir + "/params.bin", std::ios::binary | std::ios::app);
        f << "xxxx";
    }
    expect_load_error(dir, core::ErrorKind::Format, {dir + "/params.bin", "records"});
}

TEST_CASE("random manifest and llm.c header mutations give core::Error, never a crash") {
    std::string dir = make_ckpt("err_fuzz");
    const std::string mpath = dir + "/manifest.json";
    const std::string good = slurp(mpath);
    ckpt::Manifest m0;
    ckpt::State s0;
    ckpt::load(dir, &m0, &s0, 0, 1);
    uint32_t x = 12345;
    auto rnd = [&](uint32_t n) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x % n;
    };
    int errors = 0, loads = 0;
    for (int i = 0; i < 300; i++) {
        std::string t = good;
        switch (rnd(4)) {
        case 0: // overwrite one byte
            t[rnd(static_cast<uint32_t>(t.size()))] = static_cast<char>(rnd(256));
            break;
        case 1: // truncate
            t.resize(rnd(static_cast<uint32_t>(t.size())));
            break;
        case 2: // delete a span
            t.erase(rnd(static_cast<uint32_t>(t.size())), rnd(20));
            break;
        default: // replace a digit by a long number
            for (size_t k = rnd(static_cast<uint32_t>(t.size())); k < t.size(); k++)
                if (t[k] >= '0' && t[k] <= '9') {
                    t.insert(k, "99999999999");
                    break;
                }
        }
        spit(mpath, t);
        ckpt::Manifest m;
        ckpt::State s;
        try {
            ckpt::load(dir, &m, &s, 0, 1);
            // a harmless edit (whitespace, ...) must still load the exact state
            CHECK(bit_equal(s.params, s0.params));
            loads++;
        } catch (const core::Error& e) {
            CHECK(std::string(e.what()).find(dir) != std::string::npos);
            errors++;
        }
    }
    CHECK(errors > 250);
    MESSAGE("manifest mutations: " << errors << " rejected, " << loads << " harmless");
}
