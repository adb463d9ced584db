// Loss-mask files (see masks.h): header and size validation, 0/1 values, reading into memory.
// Every failure names the file and how to re-create it (scripts/prepare_data.py).
#include "data/masks.h"

#include <algorithm>

#include "core/error.h"
#include "core/input_file.h"
#include "data/shards.h"

namespace sof::data {

std::string mask_path(const std::string& shard_path) {
    return shard_path + ".mask";
}

void read_mask(const std::string& path, int64_t num_tokens, std::vector<uint8_t>* out) {
    // regular files only, opened without blocking (a FIFO is refused, never waited on)
    const core::InputFile f(path, "loss mask");
    uint8_t raw[4 * kShardHeaderInts];
    if (f.size() < sizeof(raw))
        SOF_FAIL(Format,
                 "loss mask %s: file is too short for the 1024-byte header: truncated or not a "
                 "loss-mask file; re-create it with scripts/prepare_data.py",
                 path.c_str());
    f.read_at(raw, sizeof(raw), 0);
    auto le32 = [&raw](int i) {
        const uint8_t* b = raw + 4 * i;
        return static_cast<int32_t>(static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
                                    static_cast<uint32_t>(b[2]) << 16 |
                                    static_cast<uint32_t>(b[3]) << 24);
    };
    if (le32(0) != kMaskMagic || le32(1) != kMaskVersion)
        SOF_FAIL(Format,
                 "loss mask %s: magic %d version %d, expected %d version %d: not a loss-mask "
                 "file (docs/data.md); re-create it with scripts/prepare_data.py",
                 path.c_str(), le32(0), le32(1), kMaskMagic, kMaskVersion);
    const int64_t n = le32(2);
    if (n != num_tokens)
        SOF_FAIL(Format,
                 "loss mask %s: declares %lld tokens but its token shard has %lld: the mask "
                 "belongs to another version of the shard; re-create both with "
                 "scripts/prepare_data.py",
                 path.c_str(), static_cast<long long>(n), static_cast<long long>(num_tokens));
    const uint64_t size = f.size();
    if (size != static_cast<uint64_t>(4 * kShardHeaderInts + n))
        SOF_FAIL(Format, "loss mask %s: %llu bytes, expected %lld (1024-byte header + %lld bytes)",
                 path.c_str(), static_cast<unsigned long long>(size),
                 static_cast<long long>(4 * kShardHeaderInts + n), static_cast<long long>(n));
    const int64_t kChunk = int64_t(1) << 20;
    std::vector<uint8_t> scratch;
    std::vector<uint8_t>& dst = out ? *out : scratch;
    dst.resize(static_cast<size_t>(out ? n : std::min(kChunk, n)));
    for (int64_t pos = 0; pos < n; pos += kChunk) {
        const int64_t c = std::min(kChunk, n - pos);
        uint8_t* p = dst.data() + (out ? pos : 0);
        f.read_at(p, static_cast<size_t>(c), static_cast<uint64_t>(4 * kShardHeaderInts + pos));
        uint8_t m = 0;
        for (int64_t i = 0; i < c; i++) // branch-free max (vectorized)
            m = std::max(m, p[i]);
        if (m <= 1) continue;
        for (int64_t i = 0; i < c; i++)
            if (p[i] > 1)
                SOF_FAIL(Format,
                         "loss mask %s: byte %u at token %lld; a mask holds 0 (not a target) or "
                         "1 (a target) per token; re-create it with scripts/prepare_data.py",
                         path.c_str(), static_cast<unsigned>(p[i]),
                         static_cast<long long>(pos + i));
    }
}

} // namespace sof::data
