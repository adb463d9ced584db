// Fuzz harness: llm.c token shards (uint16 and uint32). The header is either refused with a
// core::Error or matches the file; the tokens are then read and checked against a vocabulary.
#include "core/error.h"
#include "data/shards.h"
#include "fuzz.h"

using namespace sof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::scratch_dir() + "/shard.bin";
    fuzz::write_file(path, data, size);
    SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS({
        const data::ShardInfo info = data::read_shard_header(path);
        if (1024.0 + static_cast<double>(info.token_bytes) * static_cast<double>(info.num_tokens) !=
            static_cast<double>(size))
            fuzz::finding("read_shard_header accepted a file whose size does not match");
        data::ShardTokens t;
        data::read_shard(path, 50257, &t);
    });
    return 0;
}
