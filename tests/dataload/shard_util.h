// Test helpers for the data-loader tests: write llm.c token shards, uint16 or uint32 (possibly
// malformed), into a scratch directory under the build tree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sof::test {

inline std::string scratch(const std::string& name) {
    std::string d = std::string(SOF_BINARY_DIR) + "/test-scratch/dataload/" + name;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

// header[0..2] = magic, version, declared count; then the tokens as uint16.
inline void write_shard(const std::string& path, const std::vector<uint16_t>& tokens,
                        int32_t magic = 20240520, int32_t version = 1, int64_t declared = -1) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = static_cast<int32_t>(declared < 0 ? static_cast<int64_t>(tokens.size()) : declared);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
}

// A uint32 shard (llm.c's llama-3 format): header magic 20240801, version 7, then uint32 tokens
// (the test hosts are little-endian, like the file format). `declared` = INT64_MIN: the real count.
inline void write_shard32(const std::string& path, const std::vector<uint32_t>& tokens,
                          int32_t magic = 20240801, int32_t version = 7,
                          int64_t declared = INT64_MIN) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = static_cast<int32_t>(declared == INT64_MIN ? static_cast<int64_t>(tokens.size())
                                                           : declared);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 4));
}

// n uint32 tokens that identify their position: (base + i * 7919) mod vocab (most of them above
// 65535 when vocab is large).
inline std::vector<uint32_t> tokens32_for(size_t n, int64_t vocab, int64_t base) {
    std::vector<uint32_t> t(n);
    for (size_t i = 0; i < n; i++)
        t[i] = static_cast<uint32_t>((base + static_cast<int64_t>(i) * 7919) % vocab);
    return t;
}

// n tokens that identify their position: (base + i * 7) mod vocab.
inline std::vector<uint16_t> tokens_for(size_t n, int vocab, int base) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++)
        t[i] = static_cast<uint16_t>((base + i * 7) % vocab);
    return t;
}

} // namespace sof::test
