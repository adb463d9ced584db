// Reads many byte ranges of one file at the speed of the disk: a reader thread fills aligned
// buffers (buffered or O_DIRECT reads) while the caller consumes the previous one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sof::ckpt {

// One byte range of the file to deliver: [begin, end), handed out in pieces that are whole
// multiples of `unit` bytes (the element size), in file order. `what` names it in errors.
struct ByteRange {
    uint64_t begin = 0, end = 0;
    size_t unit = 1;
    std::string what;
};

struct ReadOptions {
    bool direct_io = false; // O_DIRECT (falls back to buffered if refused); buffered reads whose
                            // pages are dropped measured faster on the dev VM (docs/models.md)
    size_t chunk_bytes = size_t(32) << 20; // one read request / one buffer (multiple of 4 KiB)
    int buffers = 3;                       // ring depth: reads run this far ahead
    bool drop_pages = true; // buffered reads: drop each chunk from the page cache after use
};

struct ReadStats {
    uint64_t bytes_read = 0;  // bytes requested from the file (ranges plus alignment and gaps)
    bool direct_used = false; // every chunk was read with O_DIRECT
};

// consume(range index, byte offset inside the range, data, bytes): called on the caller's thread
// for consecutive pieces of each range in file order; data is valid until it returns.
using ConsumeFn = std::function<void(size_t, uint64_t, const unsigned char*, size_t)>;

// Reads `ranges` (any order, not overlapping) of `path`. Ranges closer than 1 MiB share a read
// request; with buffered reads each chunk is dropped from the page cache after use, so a file
// larger than RAM streams through. An I/O error or a file ending early throws core::Error
// naming the path and the range's `what`; an exception from consume stops the reader and is
// rethrown. Not collective.
ReadStats read_ranges(const std::string& path, const std::vector<ByteRange>& ranges,
                      const ConsumeFn& consume, const ReadOptions& opt = {});

} // namespace sof::ckpt
