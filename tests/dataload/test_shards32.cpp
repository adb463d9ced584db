// Big-vocabulary token shards: uint32 shards (llm.c's llama-3 format) with ids > 65535, globs
// mixing uint16 and uint32 shards, every header/size error per format, out-of-vocabulary ids,
// and the scripts/make_shard.py round trip.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/loader.h"
#include "data/shards.h"
#include "dataload/shard_util.h"

using namespace sof;
using sof::test::scratch;
using sof::test::tokens32_for;
using sof::test::tokens_for;
using sof::test::write_shard;
using sof::test::write_shard32;

namespace {

constexpr int kLlama3Vocab = 128256;

config::DataConfig cfg_for(const std::string& glob, bool shuffle = false) {
    config::DataConfig c;
    c.train = glob;
    c.val = glob;
    c.shuffle = shuffle;
    return c;
}

core::Error load_error(const config::DataConfig& cfg, int vocab, int B = 2, int T = 8) {
    try {
        data::DataLoader dl(cfg, data::Split::Train, vocab, B, T, 0, 1);
    } catch (const core::Error& e) {
        return e;
    }
    FAIL("no error thrown");
    return core::Error(core::ErrorKind::Internal, "");
}

void expect(const core::Error& e, core::ErrorKind kind, const std::vector<std::string>& needles) {
    INFO("message: " << e.what());
    CHECK(e.kind() == kind);
    for (const auto& n : needles)
        CHECK(std::string(e.what()).find(n) != std::string::npos);
}

// Every batch of one sequential epoch over `shards` (in glob order) as the loader must give it.
std::vector<std::vector<int>> expected_inputs(const std::vector<std::vector<int64_t>>& shards,
                                              int B, int T) {
    std::vector<std::vector<int>> out;
    const size_t bt = static_cast<size_t>(B) * T;
    for (const auto& sh : shards)
        for (size_t s = 0; s < (sh.size() - 1) / bt; s++) {
            std::vector<int> in;
            for (size_t i = 0; i < bt; i++)
                in.push_back(static_cast<int>(sh[s * bt + i]));
            out.push_back(in);
        }
    return out;
}

template <typename T> std::vector<int64_t> widen(const std::vector<T>& v) {
    return std::vector<int64_t>(v.begin(), v.end());
}

} // namespace

TEST_CASE("a uint32 shard with ids above 65535 trains a 128256-token vocabulary bit-exactly") {
    std::string d = scratch("u32_read");
    std::vector<uint32_t> t = tokens32_for(1000, kLlama3Vocab, 65530);
    t[5] = kLlama3Vocab - 1; // the largest valid id
    t[6] = 0;
    write_shard32(d + "/llama_000.bin", t);

    data::ShardInfo info = data::read_shard_header(d + "/llama_000.bin");
    CHECK(info.num_tokens == 1000);
    CHECK(info.token_bytes == 4);
    data::ShardTokens got;
    CHECK(data::read_shard(d + "/llama_000.bin", kLlama3Vocab, &got).num_tokens == 1000);
    CHECK(got.token_bytes == 4);
    CHECK(got.u32 == t);

    const int B = 2, T = 8;
    data::DataLoader dl(cfg_for(d + "/llama_*.bin"), data::Split::Train, kLlama3Vocab, B, T, 0, 1);
    CHECK(dl.batches_per_epoch() == 999 / 16);
    std::vector<int> in(B * T), tg(B * T);
    int above = 0;
    for (int64_t s = 0; s < dl.batches_per_epoch(); s++) {
        dl.next(in.data(), tg.data());
        for (int i = 0; i < B * T; i++) {
            REQUIRE(in[i] == static_cast<int>(t[s * B * T + i]));
            REQUIRE(tg[i] == static_cast<int>(t[s * B * T + i + 1]));
            above += in[i] > 65535;
        }
    }
    CHECK(above > 400); // most ids need the 32-bit width
    // wraps to the first batch of the next epoch
    dl.next(in.data(), tg.data());
    CHECK(in[5] == kLlama3Vocab - 1);
    CHECK(in[6] == 0);
}

TEST_CASE("one glob mixes uint16 and uint32 shards; each shard says its width") {
    std::string d = scratch("mixed");
    std::vector<uint16_t> a = tokens_for(300, 50257, 11);
    std::vector<uint32_t> b = tokens32_for(500, kLlama3Vocab, 70000);
    std::vector<uint16_t> c = tokens_for(200, 50257, 23);
    write_shard(d + "/mix_0.bin", a);
    write_shard32(d + "/mix_1.bin", b);
    write_shard(d + "/mix_2.bin", c);
    CHECK(data::read_shard_header(d + "/mix_0.bin").token_bytes == 2);
    CHECK(data::read_shard_header(d + "/mix_1.bin").token_bytes == 4);

    const int B = 2, T = 8;
    auto want = expected_inputs({widen(a), widen(b), widen(c)}, B, T);
    data::DataLoader dl(cfg_for(d + "/mix_*.bin"), data::Split::Train, kLlama3Vocab, B, T, 0, 1);
    REQUIRE(dl.batches_per_epoch() == static_cast<int64_t>(want.size()));
    CHECK(dl.describe().find("3 shard(s), 1000 tokens") != std::string::npos);
    std::vector<int> in(B * T), tg(B * T);
    for (size_t s = 0; s < want.size(); s++) {
        dl.next(in.data(), tg.data());
        REQUIRE(in == want[s]);
    }

    // shuffled over the mixed glob: state() / restore() continue exactly across the widths
    data::DataLoader sh(cfg_for(d + "/mix_*.bin", true), data::Split::Train, kLlama3Vocab, B, T, 0,
                        1);
    for (int i = 0; i < 25; i++)
        sh.next(in.data(), tg.data());
    data::LoaderState st = sh.state();
    std::vector<std::vector<int>> rest;
    for (int i = 0; i < 40; i++) {
        sh.next(in.data(), tg.data());
        rest.push_back(in);
    }
    data::DataLoader again(cfg_for(d + "/mix_*.bin", true), data::Split::Train, kLlama3Vocab, B, T,
                           0, 1);
    again.restore(st);
    for (int i = 0; i < 40; i++) {
        again.next(in.data(), tg.data());
        REQUIRE(in == rest[static_cast<size_t>(i)]);
    }

    // a 50257-token model reads the uint16 shards but the uint32 one holds larger ids
    expect(load_error(cfg_for(d + "/mix_*.bin"), 50257), core::ErrorKind::Format,
           {"mix_1.bin", "uint32", "vocab_size 50257"});
}

TEST_CASE("uint32 header and size errors name the file and what is wrong") {
    using K = core::ErrorKind;
    std::string d = scratch("u32_errors");
    const std::string p = d + "/big_vocab.bin";
    std::vector<uint32_t> ok = tokens32_for(4096, kLlama3Vocab, 3);
    auto err = [&] { return load_error(cfg_for(p), kLlama3Vocab); };

    write_shard32(p, ok, 20240802);
    expect(err(), K::Format, {"big_vocab.bin", "bad magic 20240802", "20240520", "20240801"});

    write_shard32(p, ok, 20240801, 3);
    expect(err(), K::Format, {"big_vocab.bin", "unknown version 3", "magic 20240801", "7"});
    write_shard32(p, ok, 20240801, 1); // uint16's version with uint32's magic
    expect(err(), K::Format, {"big_vocab.bin", "version 1", "goes with magic 20240520"});
    write_shard(p, tokens_for(4096, 64, 3), 20240520, 7); // and the other way round
    expect(err(), K::Format, {"big_vocab.bin", "version 7", "goes with magic 20240801"});

    write_shard32(p, tokens32_for(1000, kLlama3Vocab, 3), 20240801, 7, 4096);
    expect(err(), K::Format, {"big_vocab.bin", "4096 uint32 tokens", "17408", "5024", "truncated"});
    write_shard32(p, tokens32_for(5000, kLlama3Vocab, 3), 20240801, 7, 4096);
    expect(err(), K::Format, {"big_vocab.bin", "longer than declared"});
    write_shard32(p, ok, 20240801, 7, -5);
    expect(err(), K::Format, {"big_vocab.bin", "-5 tokens"});

    // uint32 tokens behind a uint16 header (and vice versa): the size says which width it was
    {
        std::vector<int32_t> h(256, 0);
        h[0] = 20240520, h[1] = 1, h[2] = 4096;
        std::ofstream f(p, std::ios::binary);
        f.write(reinterpret_cast<const char*>(h.data()), 1024);
        f.write(reinterpret_cast<const char*>(ok.data()), 4096 * 4);
    }
    expect(err(), K::Format,
           {"big_vocab.bin", "4096 uint16 tokens", "longer than declared", "fits 4096 uint32"});
    {
        std::vector<int32_t> h(256, 0);
        h[0] = 20240801, h[1] = 7, h[2] = 4096;
        std::vector<uint16_t> t16 = tokens_for(4096, 64, 3);
        std::ofstream f(p, std::ios::binary);
        f.write(reinterpret_cast<const char*>(h.data()), 1024);
        f.write(reinterpret_cast<const char*>(t16.data()), 4096 * 2);
    }
    expect(err(), K::Format, {"big_vocab.bin", "truncated", "fits 4096 uint16"});

    {
        std::ofstream f(p, std::ios::binary);
        int32_t magic = 20240801;
        f.write(reinterpret_cast<const char*>(&magic), 4); // a header cut short
    }
    expect(err(), K::Format, {"big_vocab.bin", "too short", "header"});
}

TEST_CASE("out-of-vocabulary ids: file, position, value and the fix, both widths") {
    using K = core::ErrorKind;
    std::string d = scratch("oov");

    std::vector<uint32_t> t32 = tokens32_for(3000, kLlama3Vocab, 5);
    t32[2345] = kLlama3Vocab; // == V
    write_shard32(d + "/llama.bin", t32);
    expect(load_error(cfg_for(d + "/llama.bin"), kLlama3Vocab), K::Format,
           {"llama.bin", "token 128256 at position 2345", "uint32", "byte offset 10404",
            "vocab_size 128256", "tokenizer", "at least 128257"});
    t32[2345] = 0;
    t32[2999] = 0xffffffffu; // the largest uint32, last token
    write_shard32(d + "/llama.bin", t32);
    expect(load_error(cfg_for(d + "/llama.bin"), kLlama3Vocab), K::Format,
           {"llama.bin", "token 4294967295 at position 2999"});
    t32[2999] = 1;
    write_shard32(d + "/llama.bin", t32);
    CHECK(data::read_shard(d + "/llama.bin", kLlama3Vocab, nullptr).num_tokens == 3000);
    // the same shard against GPT-2's vocabulary: the first id >= 50257 is named
    int64_t first = -1;
    for (size_t i = 0; i < t32.size() && first < 0; i++)
        if (t32[i] >= 50257) first = static_cast<int64_t>(i);
    REQUIRE(first >= 0);
    expect(load_error(cfg_for(d + "/llama.bin"), 50257), K::Format,
           {"llama.bin",
            "token " + std::to_string(t32[static_cast<size_t>(first)]) + " at position " +
                std::to_string(first),
            "vocab_size 50257"});

    std::vector<uint16_t> t16 = tokens_for(3000, 50257, 5);
    t16[1717] = 60000;
    write_shard(d + "/gpt2.bin", t16);
    expect(load_error(cfg_for(d + "/gpt2.bin"), 50257), K::Format,
           {"gpt2.bin", "token 60000 at position 1717", "uint16", "byte offset 4458",
            "vocab_size 50257", "at least 60001"});
    // uint16 shards cannot hold an id >= 65536: any V >= 65536 accepts every uint16 id
    t16[1717] = 65535;
    write_shard(d + "/gpt2.bin", t16);
    CHECK(data::read_shard(d + "/gpt2.bin", 65536, nullptr).num_tokens == 3000);
    CHECK(data::read_shard(d + "/gpt2.bin", kLlama3Vocab, nullptr).num_tokens == 3000);
    expect(load_error(cfg_for(d + "/gpt2.bin"), 65535), K::Format,
           {"gpt2.bin", "token 65535 at position 1717"});
}

TEST_CASE("the id check finds the first bad id across 1M-token read chunks") {
    std::string d = scratch("oov_chunks");
    const size_t n = (size_t(1) << 20) + 100; // two read chunks
    std::vector<uint32_t> t = tokens32_for(n, 100000, 1);
    t[(size_t(1) << 20) + 7] = 100000;
    t[(size_t(1) << 20) + 9] = 200000;
    write_shard32(d + "/two_chunks.bin", t);
    for (bool keep : {false, true}) {
        data::ShardTokens out;
        try {
            data::read_shard(d + "/two_chunks.bin", 100000, keep ? &out : nullptr);
            FAIL("no error");
        } catch (const core::Error& e) {
            expect(e, core::ErrorKind::Format,
                   {"two_chunks.bin", "token 100000 at position 1048583"});
        }
    }
}

TEST_CASE("first_out_of_vocab: the first id >= V or -1") {
    std::vector<uint16_t> a = {1, 2, 70, 3, 80};
    CHECK(data::first_out_of_vocab(a.data(), 5, 100) == -1);
    CHECK(data::first_out_of_vocab(a.data(), 5, 80) == 4);
    CHECK(data::first_out_of_vocab(a.data(), 5, 70) == 2);
    CHECK(data::first_out_of_vocab(a.data(), 0, 1) == -1);
    std::vector<uint16_t> top = {65535, 0};
    CHECK(data::first_out_of_vocab(top.data(), 2, 65535) == 0);
    CHECK(data::first_out_of_vocab(top.data(), 2, 65536) == -1);
    CHECK(data::first_out_of_vocab(top.data(), 2, 2147483647) == -1);
    std::vector<uint32_t> b = {65536, 128255, 0, 128256, 4294967295u};
    CHECK(data::first_out_of_vocab(b.data(), 5, 128256) == 3);
    CHECK(data::first_out_of_vocab(b.data(), 3, 128256) == -1);
    CHECK(data::first_out_of_vocab(b.data(), 5, 2147483647) == 4);
    CHECK(data::first_out_of_vocab(b.data(), 1, 65536) == 0);
}

TEST_CASE("the built-in corpus keeps its uint16 limit and says to use token shards") {
    config::DataConfig c; // builtin
    core::Error e = load_error(c, kLlama3Vocab);
    expect(e, core::ErrorKind::Config,
           {"data.train = builtin", "65536", "128256", "uint32", "make_shard.py"});
    CHECK_NOTHROW(data::DataLoader(c, data::Split::Train, 65536, 2, 8, 0, 1));
}

namespace {

// Runs scripts/make_shard.py with `args` in directory d; returns its exit status.
int make_shard(const std::string& d, const std::string& args) {
    const std::string cmd = "cd '" + d +
                            "' && /usr/bin/python3 '" SOF_SOURCE_DIR "/scripts/make_shard.py' " +
                            args + " > make_shard.log 2>&1";
    int rc = std::system(cmd.c_str());
    REQUIRE_MESSAGE(rc != -1, "cannot run " << cmd);
    REQUIRE_MESSAGE(WEXITSTATUS(rc) != 127, "python3 missing for " << cmd);
    return WEXITSTATUS(rc);
}

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

} // namespace

TEST_CASE("scripts/make_shard.py round trip: uint16 and uint32 shards the loader reads back") {
    std::string d = scratch("make_shard");
    std::vector<uint32_t> big = tokens32_for(700, kLlama3Vocab, 9);
    big[3] = kLlama3Vocab - 1;
    {
        std::ofstream f(d + "/big.txt");
        for (uint32_t t : big)
            f << t << (t % 5 ? ' ' : '\n');
    }
    // auto width: ids above 65535 -> uint32; --vocab checks them
    REQUIRE(make_shard(d, "big.bin --ids big.txt --vocab 128256") == 0);
    data::ShardTokens got;
    CHECK(data::read_shard(d + "/big.bin", kLlama3Vocab, &got).token_bytes == 4);
    CHECK(got.u32 == big);
    // the existing CLI: explicit ids (all < 65536 -> uint16), --split, --bytes
    REQUIRE(make_shard(d, "small.bin --tokens 5 65535 0 7") == 0);
    CHECK(data::read_shard(d + "/small.bin", 65536, &got).token_bytes == 2);
    CHECK(got.u16 == std::vector<uint16_t>{5, 65535, 0, 7});
    {
        std::ofstream f(d + "/text.txt");
        f << "hello, shards";
    }
    REQUIRE(make_shard(d, "txt.bin --bytes text.txt --split 8") == 0);
    CHECK(data::read_shard(d + "/txt_000000.bin", 256, &got).num_tokens == 8);
    CHECK(std::string(got.u16.begin(), got.u16.end()) == "hello, s");
    CHECK(data::read_shard(d + "/txt_000001.bin", 256, &got).num_tokens == 5);
    CHECK(std::string(got.u16.begin(), got.u16.end()) == "hards");
    // explicit width: small ids as uint32
    REQUIRE(make_shard(d, "wide.bin --tokens 1 2 3 --dtype uint32") == 0);
    CHECK(data::read_shard(d + "/wide.bin", 4, &got).token_bytes == 4);
    CHECK(got.u32 == std::vector<uint32_t>{1, 2, 3});

    // conversion: uint16 -> uint32 -> uint16 keeps the ids; a uint32 shard with big ids stays
    REQUIRE(make_shard(d, "conv32.bin --shard small.bin --dtype uint32") == 0);
    CHECK(data::read_shard(d + "/conv32.bin", 65536, &got).token_bytes == 4);
    CHECK(got.u32 == std::vector<uint32_t>{5, 65535, 0, 7});
    REQUIRE(make_shard(d, "conv16.bin --shard conv32.bin") == 0); // auto: every id < 65536
    CHECK(data::read_shard(d + "/conv16.bin", 65536, &got).token_bytes == 2);
    CHECK(got.u16 == std::vector<uint16_t>{5, 65535, 0, 7});
    CHECK(make_shard(d, "bad16.bin --shard big.bin --dtype uint16") != 0);
    CHECK_FALSE(std::filesystem::exists(d + "/bad16.bin"));

    // refusals: an id that does not fit uint16, an id >= --vocab; no file is written
    CHECK(make_shard(d, "no16.bin --tokens 1 70000 --dtype uint16") != 0);
    CHECK(read_text(d + "/make_shard.log").find("70000 at position 1 does not fit uint16") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(d + "/no16.bin"));
    CHECK(make_shard(d, "novocab.bin --tokens 1 128256 --vocab 128256") != 0);
    CHECK(read_text(d + "/make_shard.log").find("128256 at position 1 is >= --vocab 128256") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(d + "/novocab.bin"));

    // the uint16 and uint32 shards together in one glob
    data::DataLoader dl(cfg_for(d + "/*.bin"), data::Split::Train, kLlama3Vocab, 1, 2, 0, 1);
    CHECK(dl.describe().find("7 shard(s)") != std::string::npos);
}
