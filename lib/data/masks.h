// Loss-mask files next to token shards (<shard>.mask): one byte per token saying whether the
// token counts as a training target (chat data: only assistant turns). Format: docs/data.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sof::data {

// header[0..2] = magic, version, N (the shard's token count); 1024-byte header like the shards
constexpr int32_t kMaskMagic = 20250301;
constexpr int32_t kMaskVersion = 1;

// The loss-mask file of a token shard: the shard's path with ".mask" appended.
std::string mask_path(const std::string& shard_path);

// Reads and validates a mask file (header, size = 1024 + N, N == num_tokens, every byte 0 or 1)
// into out (N bytes), or only validates it when out == nullptr (streaming, constant memory).
// Format/Io errors name the file, what is wrong (the first bad byte's position) and the fix.
void read_mask(const std::string& path, int64_t num_tokens, std::vector<uint8_t>* out);

} // namespace sof::data
