// Checkpoint manifest and per-rank shard records: JSON text <-> structs, with validation that
// names the manifest file and the bad key. Internal to the ckpt module (used by checkpoint.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace sof::ckpt {

struct FileEntry {
    std::string file; // name inside the step directory
    uint64_t bytes = 0;
    uint64_t sum = 0; // block_checksum() of the whole file
};

struct ShardRecord {
    int rank = 0;
    int world_size = 1;
    int64_t step = 0;
    int64_t numel = 0;    // elements of each of the three buffers
    bool native = false;  // the files hold native state (Manifest::state), not fp32 values
    FileEntry params;     // (numel) fp32
    FileEntry exp_avg;    // (numel) fp32
    FileEntry exp_avg_sq; // (numel) fp32
};

// File names inside a step directory. One rank: "params.bin"; many: "params.rank00001.bin".
std::string shard_file_name(const char* what, int rank, int world);
std::string shard_record_name(int rank); // "shard.rank00001.json" (only in .tmp directories)
constexpr const char* kManifestName = "manifest.json";
constexpr const char* kDeckName = "deck.yaml";

// Appends the last key, "manifest_checksum": block_checksum() of every byte before its line, and
// the closing brace. `body` is the manifest text up to there ("{\n ... ,\n").
std::string seal_manifest(const std::string& body);

std::string manifest_to_json(const Manifest& m, const FileEntry& deck,
                             const std::vector<ShardRecord>& shards);
// `path` is used in messages. Validates format name/version, model dims, shard list
// (one per rank, in rank order, numel summing to num_params). deck_yaml is left empty.
void manifest_from_json(const std::string& text, const std::string& path, Manifest* m,
                        FileEntry* deck, std::vector<ShardRecord>* shards);

std::string shard_to_json(const ShardRecord& r);
ShardRecord shard_from_json(const std::string& text, const std::string& path);

} // namespace sof::ckpt
