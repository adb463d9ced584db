// Every reader of a path refuses a FIFO (and other non-regular files) at once instead of blocking
// in open(): token shards and their loss masks, safetensors and config.json, llm.c files,
// checkpoint files, decks, prepare.json; so does every writer (trace, metrics, renamed outputs).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "ckpt/checkpoint.h"
#include "ckpt/fileio.h"
#include "ckpt/hf.h"
#include "ckpt/llmc.h"
#include "ckpt/safetensors.h"
#include "ckpt_test_util.h"
#include "config/deck.h"
#include "core/input_file.h"
#include "core/trace.h"
#include "data/masks.h"
#include "data/shards.h"
#include "model/layout.h"
#include "train/batches.h"
#include "train/metrics.h"

using namespace sof;
using namespace sof::test;

namespace {

// Runs `read` on a FIFO at `path`. Should it block in open(), a watchdog opens the FIFO's other
// end after 10 s, so the test fails (rescued) instead of hanging. Returns the error text.
std::string read_fifo(const std::string& path, const std::function<void()>& read) {
    ::unlink(path.c_str());
    REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
    std::atomic<bool> done{false}, rescued{false};
    std::thread watchdog([&] {
        for (int i = 0; i < 1000 && !done; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!done) rescued = true; // stuck: open the other end to let it go on
        while (!done) {
            for (int flags : {O_WRONLY | O_NONBLOCK, O_RDONLY | O_NONBLOCK}) {
                const int fd = ::open(path.c_str(), flags);
                if (fd >= 0) ::close(fd);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    });
    std::string msg;
    core::ErrorKind kind = core::ErrorKind::Internal;
    try {
        read();
    } catch (const core::Error& e) {
        msg = e.what();
        kind = e.kind();
    }
    done = true;
    watchdog.join();
    INFO("reader of " << path << ": " << msg);
    CHECK_FALSE(rescued);
    CHECK(kind == core::ErrorKind::Io);
    CHECK(msg.find(path) != std::string::npos);
    return msg;
}

bool says_not_regular(const std::string& msg) {
    return msg.find("not a regular file") != std::string::npos;
}

} // namespace

TEST_CASE("open_regular: regular files open, FIFOs, directories and devices are refused") {
    const std::string d = ckpt_scratch("special_open");
    spit(d + "/f.txt", "hello");
    uint64_t size = 0;
    std::string why;
    const int fd = core::open_regular(d + "/f.txt", &size, &why);
    REQUIRE(fd >= 0);
    CHECK(size == 5);
    CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    ::close(fd);
    CHECK(core::open_regular(d, &size, &why) < 0);
    CHECK(why == "it is a directory");
    CHECK(core::open_regular(d + "/none", &size, &why) < 0);
    CHECK(why == "no such file");
    CHECK(core::open_regular("/dev/null", &size, &why) < 0);
    CHECK(says_not_regular(why));
    REQUIRE(::mkfifo((d + "/p").c_str(), 0644) == 0);
    CHECK(core::open_regular(d + "/p", &size, &why) < 0); // would block without O_NONBLOCK
    CHECK(says_not_regular(why));
}

TEST_CASE("a FIFO in place of any input file is an I/O error, never a hang") {
    const std::string d = ckpt_scratch("special_fifo");
    CHECK(says_not_regular(
        read_fifo(d + "/shard.bin", [&] { data::read_shard_header(d + "/shard.bin"); })));
    CHECK(says_not_regular(
        read_fifo(d + "/tokens.bin", [&] { data::read_shard(d + "/tokens.bin", 64, nullptr); })));
    CHECK(says_not_regular(read_fifo(
        d + "/tokens.bin.mask", [&] { data::read_mask(d + "/tokens.bin.mask", 64, nullptr); })));
    CHECK(says_not_regular(read_fifo(d + "/model.safetensors",
                                     [&] { ckpt::SafetensorsFile f(d + "/model.safetensors"); })));
    std::filesystem::create_directories(d + "/hf");
    CHECK(says_not_regular(
        read_fifo(d + "/hf/config.json", [&] { ckpt::read_hf_config(d + "/hf"); })));
    CHECK(says_not_regular(
        read_fifo(d + "/gpt2.bin", [&] { ckpt::read_llmc_header(d + "/gpt2.bin"); })));
    CHECK(says_not_regular(read_fifo(d + "/manifest.json", [&] {
        ckpt::read_text(d + "/manifest.json", "checkpoint manifest");
    })));
    CHECK(says_not_regular(read_fifo(d + "/params.bin", [&] {
        float x[4];
        ckpt::read_exact(d + "/params.bin", x, sizeof x);
    })));
    CHECK(says_not_regular(
        read_fifo(d + "/deck.yaml", [&] { config::load_deck(d + "/deck.yaml", {}); })));
    // data.pack with data.eos_id auto reads eos_token_id from prepare.json next to the shards
    std::filesystem::create_directories(d + "/shards");
    spit(d + "/shards/a.bin", "not read");
    CHECK(says_not_regular(read_fifo(d + "/shards/prepare.json", [&] {
        config::Config c;
        c.data.train = d + "/shards/*.bin";
        c.data.pack = true;
        c.data.eos_id = -1;
        train::resolve_eos_id(c);
    })));
    // a writer never waits for a reader either
    CHECK(read_fifo(d + "/out.bin", [&] {
              ckpt::write_file_durable(d + "/out.bin", "x", 1);
          }).find("cannot") != std::string::npos);
}

TEST_CASE("a FIFO in place of an output file is refused, never waited on or replaced") {
    const std::string d = ckpt_scratch("special_out");
    // runtime.trace: written with fopen("w") before, which blocks until a reader opens the FIFO
    CHECK(says_not_regular(read_fifo(
        d + "/trace.json", [&] { core::Trace::write_parts(d + "/trace.json", {"{}"}); })));
    // metrics.jsonl: opened read-write before, which does not block on a FIFO, but its writes do
    // once the pipe is full
    CHECK(says_not_regular(read_fifo(
        d + "/metrics.jsonl", [&] { train::MetricsWriter m(d + "/metrics.jsonl", false); })));
    // files written to a temporary and renamed over the path (effective_deck.yaml, export
    // --llmc): the rename replaced the FIFO before
    CHECK(says_not_regular(read_fifo(d + "/effective_deck.yaml", [&] {
        ckpt::write_file_atomic(d + "/effective_deck.yaml", "x\n", 2);
    })));
    CHECK(std::filesystem::is_fifo(d + "/effective_deck.yaml"));
    CHECK(says_not_regular(read_fifo(d + "/model.bin", [&] {
        model::ArchConfig a;
        a.num_layers = 1;
        a.num_heads = 2;
        a.channels = 8;
        a.max_seq_len = 4;
        a.vocab_size = a.padded_vocab_size = 16;
        const model::ParamLayout l = model::make_layout(a);
        std::vector<float> p(l.num_params, 0.5f);
        ckpt::export_llmc(d + "/model.bin", a, l, p.data());
    })));
    // a directory, a device: refused with what it is; /dev/null stays a metrics sink
    std::filesystem::create_directories(d + "/adir");
    try {
        ckpt::write_file_atomic(d + "/adir", "x", 1);
        FAIL("a directory was accepted");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("it exists and is a directory") != std::string::npos);
    }
    CHECK_THROWS_AS(core::Trace::write_parts("/dev/null", {"{}"}), core::Error);
    CHECK_NOTHROW(train::MetricsWriter("/dev/null", false));
    // regular files are written as before
    ckpt::write_file_atomic(d + "/deck.yaml", "x\n", 2);
    core::Trace::write_parts(d + "/t.json", {"{}"});
    CHECK(std::filesystem::file_size(d + "/deck.yaml") == 2);
    CHECK(std::filesystem::file_size(d + "/t.json") > 2);
}
