// Loss-mask files (see masks.h): header and size validation, 0/1 values, reading into memory.
// Every failure names the file and how to re-create it (scripts/prepare_data.py).
#include "data/masks.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "data/shards.h"

namespace sof::data {

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

} // namespace

std::string mask_path(const std::string& shard_path) {
    return shard_path + ".mask";
}

void read_mask(const std::string& path, int64_t num_tokens, std::vector<uint8_t>* out) {
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
    if (!f) SOF_FAIL(Io, "loss mask %s: cannot open: %s", path.c_str(), std::strerror(errno));
    uint8_t raw[4 * kShardHeaderInts];
    if (std::fread(raw, 1, sizeof(raw), f.get()) != sizeof(raw))
        SOF_FAIL(Format,
                 "loss mask %s: file is too short for the 1024-byte header: truncated or not a "
                 "loss-mask file; re-create it with scripts/prepare_data.py",
                 path.c_str());
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
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec || size != static_cast<uintmax_t>(4 * kShardHeaderInts + n))
        SOF_FAIL(Format, "loss mask %s: %ju bytes, expected %lld (1024-byte header + %lld bytes)",
                 path.c_str(), ec ? uintmax_t(0) : size,
                 static_cast<long long>(4 * kShardHeaderInts + n), static_cast<long long>(n));
    const int64_t kChunk = int64_t(1) << 20;
    std::vector<uint8_t> scratch;
    std::vector<uint8_t>& dst = out ? *out : scratch;
    dst.resize(static_cast<size_t>(out ? n : std::min(kChunk, n)));
    for (int64_t pos = 0; pos < n; pos += kChunk) {
        const int64_t c = std::min(kChunk, n - pos);
        uint8_t* p = dst.data() + (out ? pos : 0);
        if (std::fread(p, 1, static_cast<size_t>(c), f.get()) != static_cast<size_t>(c))
            SOF_FAIL(Io, "loss mask %s: read failed at byte %lld: %s", path.c_str(),
                     static_cast<long long>(4 * kShardHeaderInts + pos),
                     std::ferror(f.get()) ? std::strerror(errno) : "unexpected end of file");
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
