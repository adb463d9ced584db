// Limits caught when a deck is loaded, before any work: deck files that are not regular files or
// are too large, thread counts and device memory beyond their bounds, a vocabulary the built-in
// corpus cannot hold (token shards hold any), unusable output directories (I/O errors), decks
// nested too deeply, and docs/deck.md telling the plugin search order the code uses.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deck_test_util.h"

namespace fs = std::filesystem;
using namespace sof;
using namespace sof::config;
using sof::test::contains;
using sof::test::deck_error;

namespace {

// The error (kind and message) loading the deck file `path` throws.
core::Error load_error(const std::string& path, const std::vector<std::string>& ov = {}) {
    try {
        load_deck(path, ov);
    } catch (const core::Error& e) {
        return e;
    }
    FAIL("expected an error loading " << path);
    return core::Error(core::ErrorKind::Internal, "");
}

core::Error string_error(const std::string& yaml, const std::vector<std::string>& ov) {
    try {
        load_deck_from_string(yaml, "deck.yaml", ov);
    } catch (const core::Error& e) {
        return e;
    }
    FAIL("expected an error");
    return core::Error(core::ErrorKind::Internal, "");
}

} // namespace

TEST_CASE("deck files: a FIFO, a device and an oversized file are refused before reading") {
    std::string d = test::scratch("limits_files");
    REQUIRE(::mkfifo((d + "/fifo.yaml").c_str(), 0644) == 0);
    core::Error e = load_error(d + "/fifo.yaml"); // would block forever in open/read
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "not a regular file"));
    e = load_error("/dev/zero"); // would eat memory without bound
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "'/dev/zero'"));
    CHECK(contains(e.what(), "not a regular file"));
    {
        std::ofstream f(d + "/big.yaml");
        std::string line = "# " + std::string(1000, 'x') + "\n";
        for (int i = 0; i < 1100; i++)
            f << line;
    }
    e = load_error(d + "/big.yaml");
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "more than the 1048576"));
}

TEST_CASE("thread counts, device memory and vocabulary beyond their bounds") {
    std::string msg = deck_error("runtime:\n  threads: 100000\n");
    CHECK(contains(msg, "deck.yaml:2: runtime.threads = 100000 is out of range [0, 4096]"));
    msg = deck_error("", {"optimizer.threads=100000"});
    CHECK(contains(msg, "optimizer.threads = 100000 is out of range [0, 4096]"));
    msg = deck_error("device:\n  memory_gb: 1e30\n");
    CHECK(contains(msg, "device.memory_gb = 1e30 is out of range [0, 1048576]"));
}

TEST_CASE("vocabularies above 65536: refused for the uint16 built-in corpus, fine with shards") {
    // the built-in corpus (the default data) stores uint16 tokens
    std::string msg = deck_error("model:\n  vocab_size: 128256\n");
    CHECK(contains(msg, "deck.yaml:2: model.vocab_size = 128256 does not fit the built-in corpus "
                        "(data.train = builtin)"));
    CHECK(contains(msg, "at most 65536"));
    CHECK(contains(msg, "uint32 shards"));
    load_deck_from_string("model:\n  vocab_size: 65536\n", "ok.yaml", {}); // the largest allowed
    std::string d = test::scratch("limits_vocab");
    test::write_file(d + "/tok_000.bin", "x"); // the deck only checks that the glob matches
    const std::string shards = "data:\n  train: " + d + "/tok_*.bin\n";
    msg = deck_error("model:\n  vocab_size: 128256\n" + shards); // data.val is still builtin
    CHECK(contains(msg, "(data.val = builtin)"));
    // token shards (uint16 or uint32, the loader checks every id): Llama-3's and Qwen's sizes
    for (int v : {128256, 151936, 16777216}) {
        Config c = load_deck_from_string("model:\n  vocab_size: " + std::to_string(v) + "\n" +
                                             shards + "  val: " + d + "/tok_*.bin\n",
                                         "big.yaml", {});
        CHECK(c.model.vocab_size == v);
    }
    // beyond 2^24 is a typo (and would overflow int shape arithmetic)
    msg = deck_error("model:\n  vocab_size: 16777217\n" + shards);
    CHECK(contains(msg, "model.vocab_size = 16777217 is out of range [1, 16777216]"));
    msg = deck_error("model:\n  padded_vocab_size: 2147483647\n");
    CHECK(contains(msg, "model.padded_vocab_size = 2147483647 is out of range [0, 16777216]"));
}

TEST_CASE("unusable out_dir, checkpoint_dir and metrics paths are I/O errors at load time") {
    std::string d = test::scratch("limits_dirs");
    test::write_file(d + "/afile", "x");
    core::Error e = string_error("runtime:\n  out_dir: " + d + "/afile\n", {});
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "deck.yaml:2: runtime.out_dir: '" + d +
                                 "/afile' exists and is "
                                 "not a directory"));
    e = string_error("", {"train.checkpoint_dir=" + d + "/afile/ckpt"});
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "train.checkpoint_dir"));
    CHECK(contains(e.what(), "is not a directory"));
    e = string_error("", {"train.metrics=" + d + "/afile/m.jsonl"});
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "train.metrics"));
    e = string_error("", {"train.metrics=" + d});
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "is a directory"));
    REQUIRE(::mkfifo((d + "/m.fifo").c_str(), 0644) == 0);
    e = string_error("", {"train.metrics=" + d + "/m.fifo"}); // fopen would block forever
    CHECK(e.kind() == core::ErrorKind::Io);
    CHECK(contains(e.what(), "is a FIFO, not a regular file"));
    // a directory that does not exist yet under a usable parent is fine
    Config c = load_deck_from_string("", "deck.yaml", {"runtime.out_dir=" + d + "/new/out"});
    CHECK(c.runtime.out_dir == d + "/new/out");
}

TEST_CASE("a deck nested too deeply says so") {
    std::string yaml = "train: " + std::string(1000, '[') + std::string(1000, ']') + "\n";
    std::string msg = deck_error(yaml);
    CHECK(contains(msg, "nested too deeply"));
    CHECK_FALSE(contains(msg, "bad file"));
}

TEST_CASE("parse_deck_text: a saved deck with unknown keys, no file checks") {
    Config c = parse_deck_text("train:\n  lr: 0.5\n  removed_key: 1\ndata:\n  train: gone/*.bin\n",
                               "saved.yaml");
    CHECK(c.train.lr == 0.5f);
    CHECK(c.data.train == "gone/*.bin");
}

TEST_CASE("docs/deck.md gives the plugin search order of optim::plugin_dir") {
    std::ifstream f(std::string(SOF_SOURCE_DIR) + "/docs/deck.md");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string row;
    for (std::string line; std::getline(ss, line);)
        if (line.rfind("| `optimizer.plugin_dir` |", 0) == 0) row = line;
    INFO(row);
    // the code (lib/optim/optimizer.cpp, plugin_dir): the key, then $SOF_PLUGIN_DIR, then the
    // program's ../plugins (tests/optim/test_optim_loader checks that order)
    CHECK(contains(row, "empty = `$SOF_PLUGIN_DIR` when set, else `<program dir>/../plugins`"));
}
