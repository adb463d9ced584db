// What a data.train / data.val value names on disk: llm.c token shards and Megatron-LM indexed
// datasets (.bin + .idx), by glob or by Megatron path prefix. One rule for `check` and the loader.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace sof::config {

// One input of a split: an llm.c token shard, or a Megatron-LM indexed dataset.
struct DataFile {
    std::string path;      // the shard; for Megatron the prefix (without .bin / .idx)
    bool megatron = false; // <path>.idx (the index) and <path>.bin (the tokens)
};

// Why a value names no usable input (kind Config: nothing matches, only loss masks, a Megatron
// half without the other; kind Io: a match that is not a regular file). Empty when fine.
struct DataFilesError {
    core::ErrorKind kind = core::ErrorKind::Config;
    std::string message; // "data.train: ..." (the key first; no deck location)
};

// The inputs a value (not "builtin") names, sorted bytewise by path. The value is a glob(3)
// pattern relative to the working directory: a match ending in ".mask" is a loss mask (travels
// with its shard), a directory is skipped, a match P.idx or P.bin whose sibling (P.bin / P.idx)
// exists is the Megatron dataset P (once), any other regular file an llm.c shard. A value that
// matches nothing is tried as a Megatron prefix: P.idx and P.bin. A match that exists but is not a
// regular file (a FIFO, a device, a symbolic link to one) is an error saying what it is.
// key: "data.train" / "data.val", for messages. On error returns {} and fills *err.
std::vector<DataFile> find_data_files(const std::string& value, const std::string& key,
                                      DataFilesError* err);

// The same; throws core::Error (err's kind and message).
std::vector<DataFile> find_data_files(const std::string& value, const std::string& key);

// The files a DataFile reads: the shard, or <prefix>.idx and <prefix>.bin.
std::vector<std::string> data_file_paths(const DataFile& f);

} // namespace sof::config
