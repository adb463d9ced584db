// llm.c token shards: glob expansion and validation (256 x int32 header with magic 20240520,
// version 1 and the token count, then uint16 tokens), and reading a shard's tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sof::data {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int kShardHeaderInts = 256; // header bytes = 1024

// The files matching a glob pattern, sorted bytewise. `key` names the deck key for messages
// ("data.train"). Throws Config when nothing matches (the message gives the working directory).
std::vector<std::string> expand_glob(const std::string& pattern, const std::string& key);

// Validates the header and the file size; returns the token count. Io when the file cannot be
// opened/read, Format when its contents are wrong; every message names the file and the fix.
int64_t read_shard_header(const std::string& path);

// Reads all tokens of a shard (validating header, size and every token < vocab) into out,
// or, with out == nullptr, only validates (streaming, constant memory). Returns the token count.
int64_t read_shard(const std::string& path, int vocab, std::vector<uint16_t>* out);

} // namespace sof::data
