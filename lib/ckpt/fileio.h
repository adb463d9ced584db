// Durable file I/O for checkpoints: whole-file reads and writes with fsync, directory fsync,
// atomic rename, and the FNV-1a 64 checksum recorded in manifests. Errors name the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sof::ckpt {

// FNV-1a 64 over bytes: h = 0xcbf29ce484222325; for each byte b: h ^= b; h *= 0x100000001b3.
// `seed` continues a previous call (pass the previous result to hash a file in pieces).
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);
std::string checksum_hex(uint64_t h); // 16 lowercase hex digits

// The checksum recorded in manifests ("fnv1a64-blocks-64MiB"): FNV-1a 64 of each 64 MiB block of
// the data (the last block may be shorter; empty data is one empty block), then FNV-1a 64 over
// the block hashes, each as 8 little-endian bytes. Blocks are hashed on up to 32 threads, so a
// multi-GB shard costs well under a second on a many-core host (plain FNV-1a is ~0.5-1 GB/s).
constexpr const char* kChecksumAlgorithm = "fnv1a64-blocks-64MiB";
constexpr size_t kChecksumBlock = size_t(64) << 20;
uint64_t block_checksum(const void* data, size_t bytes);

// Streams bytes into a new file (created or truncated); finish() fsyncs and closes. Destroying an
// unfinished writer closes the file without syncing (the caller removes the partial file).
class DurableWriter {
  public:
    explicit DurableWriter(const std::string& path);
    ~DurableWriter();
    DurableWriter(const DurableWriter&) = delete;
    DurableWriter& operator=(const DurableWriter&) = delete;
    void write(const void* data, size_t bytes);
    void finish();

  private:
    std::string path_;
    int fd_ = -1;
};

// Writes `bytes` bytes to `path` (created or truncated), then fsyncs the file.
// Throws core::Error(Io) naming the path and the OS reason.
void write_file_durable(const std::string& path, const void* data, size_t bytes);

// fsync a directory so that entries created/renamed in it survive a crash.
void fsync_dir(const std::string& dir);

// Size of a regular file in bytes; throws Io naming the path if it is missing or not a file.
// `what` says what the file is for ("checkpoint params shard") and appears in the message.
uint64_t file_size_checked(const std::string& path, const char* what);

// Reads exactly `bytes` bytes from `path` starting at `offset` into `out`; Io error if the file
// is shorter (names the path, expected and actual size).
void read_exact(const std::string& path, void* out, size_t bytes, uint64_t offset = 0);

// Reads a whole (small) text file.
std::string read_text(const std::string& path, const char* what);

// Index of the first NaN or infinity in v[0..n), or n when every value is finite (threaded).
size_t first_non_finite(const float* v, size_t n);

// A flat element index as coordinates of a row-major shape: 37 in (4, 10) -> "[3, 7]".
std::string index_in_shape(size_t flat, const std::vector<int64_t>& shape);

// Writes `bytes` to `path` atomically: path + ".tmp", fsync, rename over `path`, fsync the
// parent directory. A reader sees either the old file or the complete new one. An existing
// `path` that is not a regular file (a FIFO, device, directory) is refused (Io, naming `what`),
// not replaced.
void write_file_atomic(const std::string& path, const void* data, size_t bytes,
                       const char* what = "file");

} // namespace sof::ckpt
