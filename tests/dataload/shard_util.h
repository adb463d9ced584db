// Test helpers for the data-loader tests: write llm.c token shards (possibly malformed) into a
// scratch directory under the build tree.
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

// n tokens that identify their position: (base + i * 7) mod vocab.
inline std::vector<uint16_t> tokens_for(size_t n, int vocab, int base) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++)
        t[i] = static_cast<uint16_t>((base + i * 7) % vocab);
    return t;
}

} // namespace sof::test
