// llm.c token shards: glob expansion, header validation (256 x int32 header: magic, version,
// token count) and reading a shard's tokens, uint16 (GPT-2 shards) or uint32 (llama-3 shards).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sof::data {

constexpr int kShardHeaderInts = 256; // header bytes = 1024
// uint16 tokens (llm.c's GPT-2 shards, "gpt-2" in dev/data/data_common.py)
constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
// uint32 tokens (llm.c's llama-3 shards, "llama-3" in dev/data/data_common.py)
constexpr int32_t kShardMagic32 = 20240801;
constexpr int32_t kShardVersion32 = 7;

// What a shard's header says: how many tokens and how wide each one is.
struct ShardInfo {
    int64_t num_tokens = 0; // N >= 1
    int token_bytes = 2;    // 2 (uint16) or 4 (uint32), little-endian
};

// The tokens of one shard in the width the file stores them: exactly one of u16/u32 is used.
struct ShardTokens {
    int token_bytes = 2;
    std::vector<uint16_t> u16; // (N) when token_bytes == 2
    std::vector<uint32_t> u32; // (N) when token_bytes == 4
    int64_t size() const {
        return static_cast<int64_t>(token_bytes == 2 ? u16.size() : u32.size());
    }
};

// Every file a data value names, sorted bytewise (for fingerprints): the glob's matches that are
// not directories (shards, loss masks, Megatron .bin/.idx), or a Megatron prefix's .idx and .bin.
// `key` names the deck key for messages ("data.train"). Throws what config::find_data_files
// throws (nothing matches: Config, with the working directory; a FIFO among them: Io).
std::vector<std::string> expand_glob(const std::string& pattern, const std::string& key);

// Validates the header (magic/version pair) and the file size; returns the token count and
// width. Io when the file cannot be opened/read, Format when its contents are wrong; every
// message names the file, what is wrong and the fix.
ShardInfo read_shard_header(const std::string& path);

// Reads all tokens of a shard (validating header, size and every token id < vocab) into out,
// or, with out == nullptr, only validates (streaming, constant memory). An id >= vocab is a
// Format error naming the file, the token's position and value and the fix. Returns the header.
ShardInfo read_shard(const std::string& path, int vocab, ShardTokens* out);

// The first index i in [0, n) with tokens[i] >= vocab, or -1 when all are in range. A
// branch-free max over the data first (vectorized), the position only on failure.
int64_t first_out_of_vocab(const uint16_t* tokens, int64_t n, int vocab);
int64_t first_out_of_vocab(const uint32_t* tokens, int64_t n, int vocab);

} // namespace sof::data
