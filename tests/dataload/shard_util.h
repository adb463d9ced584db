// Test helpers for the data-loader tests: write llm.c token shards, uint16 or uint32, and
// Megatron-LM indexed datasets (possibly malformed), into a scratch directory under the build tree.
#pragma once

#include <cstdint>
#include <cstring>
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

// A Megatron-LM indexed dataset as the format documents it (megatron/core/datasets/
// indexed_dataset.py: _IndexWriter): every field explicit, so a test can break any one of them.
struct MegatronFiles {
    std::string magic = std::string("MMIDIDX\0\0", 9);
    uint64_t version = 1;
    uint8_t code = 8;               // dtype: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16
    std::vector<int32_t> lengths;   // (S) tokens per sequence
    std::vector<int64_t> pointers;  // (S) byte offset of each sequence in the .bin
    std::vector<int64_t> documents; // (D) sequence index where each document starts, then S
    std::vector<int64_t> tokens;    // the .bin's tokens, written in the dtype of `code`
    int64_t seq_count = -1, doc_count = -1; // header counts (-1: the arrays' sizes)
    std::vector<int8_t> modes;              // a mode per sequence (multimodal datasets)
};

inline int megatron_bytes(uint8_t code) {
    return code == 1 || code == 2 ? 1 : code == 3 || code == 8 ? 2 : code == 4 || code == 7 ? 4 : 8;
}

// What IndexedDatasetBuilder.add_document writes for these documents (each a list of sentences):
// the sentences back to back, a document index after each document.
inline MegatronFiles megatron_of(const std::vector<std::vector<std::vector<int64_t>>>& docs,
                                 uint8_t code = 8) {
    MegatronFiles m;
    m.code = code;
    m.documents.push_back(0);
    int64_t bytes = 0;
    for (const auto& doc : docs) {
        for (const auto& sentence : doc) {
            m.lengths.push_back(static_cast<int32_t>(sentence.size()));
            m.pointers.push_back(bytes);
            bytes += static_cast<int64_t>(sentence.size()) * megatron_bytes(code);
            m.tokens.insert(m.tokens.end(), sentence.begin(), sentence.end());
        }
        m.documents.push_back(static_cast<int64_t>(m.lengths.size()));
    }
    return m;
}

inline void write_megatron(const std::string& prefix, const MegatronFiles& m) {
    std::ofstream idx(prefix + ".idx", std::ios::binary);
    auto put = [&idx](const void* p, size_t n) {
        idx.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    put(m.magic.data(), m.magic.size());
    put(&m.version, 8);
    put(&m.code, 1);
    const uint64_t s = m.seq_count < 0 ? m.lengths.size() : static_cast<uint64_t>(m.seq_count);
    const uint64_t d = m.doc_count < 0 ? m.documents.size() : static_cast<uint64_t>(m.doc_count);
    put(&s, 8);
    put(&d, 8);
    put(m.lengths.data(), 4 * m.lengths.size());
    put(m.pointers.data(), 8 * m.pointers.size());
    put(m.documents.data(), 8 * m.documents.size());
    put(m.modes.data(), m.modes.size());
    std::ofstream bin(prefix + ".bin", std::ios::binary);
    const int w = megatron_bytes(m.code);
    for (int64_t t : m.tokens) {
        char b[8];
        std::memcpy(b, &t, 8); // little-endian host: the low bytes are the narrow value
        bin.write(b, w);
    }
}

} // namespace sof::test
