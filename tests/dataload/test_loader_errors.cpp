// Every way token data can be wrong gives a core::Error of the right kind whose message names
// the file (or glob) and the reason; also malformed LoaderState text and mismatched restores.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/loader.h"
#include "dataload/shard_util.h"

using namespace sof;
using sof::test::scratch;
using sof::test::tokens_for;
using sof::test::write_shard;

namespace {

// Constructs a train loader and returns the error it throws (fails the test if none).
core::Error load_error(const config::DataConfig& cfg, int vocab = 64, int B = 2, int T = 8,
                       int world = 1) {
    try {
        data::DataLoader dl(cfg, data::Split::Train, vocab, B, T, 0, world);
    } catch (const core::Error& e) {
        return e;
    }
    FAIL("no error thrown");
    return core::Error(core::ErrorKind::Internal, "");
}

config::DataConfig cfg_for(const std::string& glob) {
    config::DataConfig c;
    c.train = glob;
    return c;
}

void expect(const core::Error& e, core::ErrorKind kind, const std::vector<std::string>& needles) {
    INFO("message: " << e.what());
    CHECK(e.kind() == kind);
    for (const auto& n : needles)
        CHECK(std::string(e.what()).find(n) != std::string::npos);
}

core::Error state_error(const std::string& text) {
    try {
        data::LoaderState::from_string(text);
    } catch (const core::Error& e) {
        return e;
    }
    FAIL("no error thrown for '" << text << "'");
    return core::Error(core::ErrorKind::Internal, "");
}

} // namespace

TEST_CASE("bad shard contents are Format errors naming the file and the reason") {
    using K = core::ErrorKind;
    std::string d = scratch("errors");
    const std::string p = d + "/bad_shard.bin";
    std::vector<uint16_t> ok = tokens_for(4096, 64, 3);

    write_shard(p, ok, 12345);
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "magic", "12345", "20240520"});

    write_shard(p, ok, 20240326); // an llm.c model checkpoint's magic
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "magic", "checkpoint"});

    write_shard(p, ok, 20240520, 7);
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "version 7"});

    write_shard(p, tokens_for(1000, 64, 3), 20240520, 1, 4096);
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "truncated", "4096"});

    write_shard(p, tokens_for(5000, 64, 3), 20240520, 1, 4096);
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "longer than declared"});

    write_shard(p, ok, 20240520, 1, 0);
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "0 tokens"});

    {
        std::ofstream f(p, std::ios::binary);
        f << "short";
    }
    expect(load_error(cfg_for(p)), K::Format, {"bad_shard.bin", "header"});

    std::vector<uint16_t> bad = ok;
    bad[3001] = 64; // == vocab
    write_shard(p, bad);
    expect(load_error(cfg_for(p)), K::Format,
           {"bad_shard.bin", "token 64", "position 3001", "vocab_size 64"});
}

TEST_CASE("an empty glob, a too-small shard, an unreadable file") {
    using K = core::ErrorKind;
    std::string d = scratch("errors2");
    expect(load_error(cfg_for(d + "/nothing_*.bin")), K::Config,
           {"data.train", "nothing_*.bin", "no file matches"});

    write_shard(d + "/small.bin", tokens_for(16, 64, 0)); // B*T+1 = 17 needed
    expect(load_error(cfg_for(d + "/small.bin")), K::Config, {"small.bin", "16 tokens", "17"});
    write_shard(d + "/small.bin", tokens_for(17, 64, 0));
    // fine for one rank, too small for two
    expect(load_error(cfg_for(d + "/small.bin"), 64, 2, 8, 2), K::Config, {"small.bin", "33"});

    config::DataConfig b;
    b.builtin.train_tokens = 10;
    expect(load_error(b), K::Config, {"data.builtin.train_tokens", "10"});

    // one good and one bad shard: the bad one is named
    write_shard(d + "/m_0.bin", tokens_for(100, 64, 0));
    write_shard(d + "/m_1.bin", tokens_for(100, 64, 0), 20240520, 2);
    expect(load_error(cfg_for(d + "/m_*.bin")), K::Format, {"m_1.bin", "version"});
}

TEST_CASE("LoaderState::from_string rejects malformed text with Format errors") {
    using K = core::ErrorKind;
    const std::string good = data::LoaderState{}.to_string();
    CHECK_NOTHROW(data::LoaderState::from_string(good));
    expect(state_error(""), K::Format, {"v1"});
    expect(state_error("v2 epoch=0"), K::Format, {"v1"});
    expect(state_error("v1 epoch=0 shard=0"), K::Format, {"missing key 'sample'"});
    expect(state_error(good + " colour=3"), K::Format, {"unknown key 'colour'"});
    expect(state_error(good + " epoch=1"), K::Format, {"epoch given twice"});
    std::string t = good;
    t.replace(t.find("sample=0"), 8, "sample=x1");
    expect(state_error(t), K::Format, {"sample", "x1", "not an integer"});
    t = good;
    t.replace(t.find("shard=0"), 7, "shard=-2");
    expect(state_error(t), K::Format, {"shard", "negative"});
    t = good;
    t.replace(t.find("epoch=0"), 7, "epoch");
    expect(state_error(t), K::Format, {"'epoch' is not key=value"});
}

TEST_CASE("restore() rejects a position saved for other data or geometry") {
    std::string d = scratch("errors3");
    write_shard(d + "/a.bin", tokens_for(200, 64, 0));
    config::DataConfig c = cfg_for(d + "/a.bin");
    data::DataLoader a(c, data::Split::Train, 64, 2, 8, 0, 1);
    data::LoaderState s = a.state();
    data::DataLoader other_bt(c, data::Split::Train, 64, 2, 4, 0, 1);
    try {
        other_bt.restore(s);
        FAIL("no error");
    } catch (const core::Error& e) {
        expect(e, core::ErrorKind::Config, {"data.train", "bt=16", "bt=8", "batch_size"});
    }
    c.seed = 1;
    data::DataLoader other_seed(c, data::Split::Train, 64, 2, 8, 0, 1);
    CHECK_THROWS_AS(other_seed.restore(s), core::Error);
    s.sample = 1000;
    CHECK_THROWS_AS(a.restore(s), core::Error);
}
