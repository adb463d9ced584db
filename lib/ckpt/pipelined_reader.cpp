// read_ranges(): plans 4 KiB-aligned read chunks over the requested byte ranges, fills a ring of
// aligned buffers on a reader thread and hands the pieces to the caller in file order.
#include "ckpt/pipelined_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "core/input_file.h"

namespace sof::ckpt {

namespace {

constexpr uint64_t kAlign = 4096;            // O_DIRECT offset, length and memory alignment
constexpr uint64_t kGap = uint64_t(1) << 20; // a hole this small between ranges is read through

uint64_t align_up(uint64_t x) {
    return (x + kAlign - 1) / kAlign * kAlign;
}

struct Piece {
    size_t range;       // index into the ranges
    uint64_t range_off; // byte offset inside the range
    size_t buf_off;     // byte offset inside the chunk's buffer
    size_t bytes;       // a multiple of the range's unit
};

// One read request: [begin, align_up(data_end)) of the file into one buffer.
struct Chunk {
    uint64_t begin = 0;    // aligned file offset
    uint64_t data_end = 0; // file offset just past the last piece
    std::vector<Piece> pieces;
    uint64_t read_bytes() const { return align_up(data_end) - begin; }
};

std::vector<Chunk> plan_chunks(const std::vector<ByteRange>& ranges, uint64_t cap) {
    std::vector<size_t> order(ranges.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return ranges[a].begin < ranges[b].begin; });
    std::vector<Chunk> chunks;
    for (size_t i : order) {
        const ByteRange& r = ranges[i];
        uint64_t pos = r.begin;
        while (pos < r.end) {
            if (chunks.empty() || pos > chunks.back().data_end + kGap ||
                pos + r.unit > chunks.back().begin + cap) {
                Chunk c;
                c.begin = pos / kAlign * kAlign;
                c.data_end = pos;
                chunks.push_back(std::move(c));
            }
            Chunk& c = chunks.back();
            const uint64_t room = (c.begin + cap - pos) / r.unit * r.unit;
            const uint64_t bytes = std::min(r.end - pos, room);
            c.pieces.push_back(
                {i, pos - r.begin, static_cast<size_t>(pos - c.begin), static_cast<size_t>(bytes)});
            c.data_end = pos + bytes;
            pos += bytes;
        }
    }
    return chunks;
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

struct FreeDeleter {
    void operator()(unsigned char* p) const { std::free(p); }
};

// The name of the range that holds byte `got` of chunk c (for error messages).
const std::string& what_at(const std::vector<ByteRange>& ranges, const Chunk& c, uint64_t got) {
    for (const Piece& p : c.pieces)
        if (p.buf_off + p.bytes > got) return ranges[p.range].what;
    return ranges[c.pieces.back().range].what;
}

} // namespace

ReadStats read_ranges(const std::string& path, const std::vector<ByteRange>& ranges,
                      const ConsumeFn& consume, const ReadOptions& opt) {
    if (opt.chunk_bytes < 2 * kAlign || opt.chunk_bytes % kAlign != 0 || opt.buffers < 2)
        SOF_FAIL(Internal, "read_ranges: chunk_bytes %zu (a multiple of 4096, >= 8192), buffers %d",
                 opt.chunk_bytes, opt.buffers);
    for (const ByteRange& r : ranges)
        if (r.unit == 0 || r.unit > kAlign || r.end < r.begin || (r.end - r.begin) % r.unit != 0)
            SOF_FAIL(Internal, "read_ranges: bad range [%llu, %llu) unit %zu for '%s'",
                     static_cast<unsigned long long>(r.begin),
                     static_cast<unsigned long long>(r.end), r.unit, r.what.c_str());
    const std::vector<Chunk> chunks = plan_chunks(ranges, opt.chunk_bytes);
    ReadStats st;
    if (chunks.empty()) return st;
    Fd buffered, direct;
    std::string why;
    buffered.fd = core::open_regular(path, nullptr, &why);
    if (buffered.fd < 0) SOF_FAIL(Io, "cannot open '%s': %s", path.c_str(), why.c_str());
    if (opt.direct_io) { // may fail; the path may have been replaced: regular files only
        direct.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
        struct stat st;
        if (direct.fd >= 0 && (::fstat(direct.fd, &st) != 0 || !S_ISREG(st.st_mode))) {
            ::close(direct.fd);
            direct.fd = -1;
        }
    }
    const size_t nb = std::min(static_cast<size_t>(opt.buffers), chunks.size());
    std::vector<std::unique_ptr<unsigned char, FreeDeleter>> bufs;
    for (size_t i = 0; i < nb; i++) {
        bufs.emplace_back(static_cast<unsigned char*>(std::aligned_alloc(kAlign, opt.chunk_bytes)));
        if (!bufs.back()) SOF_FAIL(Io, "cannot allocate %zu bytes of read buffer", opt.chunk_bytes);
    }
    for (const Chunk& c : chunks)
        st.bytes_read += c.read_bytes();

    // reader thread state, guarded by mu
    std::mutex mu;
    std::condition_variable cv;
    size_t filled = 0, consumed = 0; // chunks read / chunks handed back
    bool stop = false;
    std::exception_ptr reader_error;
    bool direct_ok = direct.fd >= 0; // reader thread only; read after join

    auto read_chunk = [&](const Chunk& c, unsigned char* buf) {
        const uint64_t need = c.data_end - c.begin, len = c.read_bytes();
        uint64_t got = 0;
        while (got < len) {
            const bool d = direct_ok && got % kAlign == 0;
            const ssize_t r = ::pread(d ? direct.fd : buffered.fd, buf + got, len - got,
                                      static_cast<off_t>(c.begin + got));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && d && errno == EINVAL) { // this filesystem refuses O_DIRECT: buffered
                direct_ok = false;
                continue;
            }
            if (r < 0)
                SOF_FAIL(Io, "'%s': reading '%s' failed at byte %llu: %s", path.c_str(),
                         what_at(ranges, c, got).c_str(),
                         static_cast<unsigned long long>(c.begin + got), std::strerror(errno));
            if (r == 0) break; // end of file (the aligned tail may lie past it)
            got += static_cast<uint64_t>(r);
        }
        if (got < need)
            SOF_FAIL(Io, "'%s': the file ends at byte %llu, inside '%s' (truncated?)", path.c_str(),
                     static_cast<unsigned long long>(c.begin + got),
                     what_at(ranges, c, got).c_str());
        if (!direct_ok && opt.drop_pages) // keep a file larger than RAM out of the page cache
            ::posix_fadvise(buffered.fd, static_cast<off_t>(c.begin), static_cast<off_t>(len),
                            POSIX_FADV_DONTNEED);
    };

    std::thread reader([&] {
        try {
            for (size_t k = 0; k < chunks.size(); k++) {
                {
                    std::unique_lock<std::mutex> lk(mu);
                    cv.wait(lk, [&] { return stop || k < consumed + nb; });
                    if (stop) return;
                }
                read_chunk(chunks[k], bufs[k % nb].get());
                {
                    std::lock_guard<std::mutex> lk(mu);
                    filled = k + 1;
                }
                cv.notify_all();
            }
        } catch (...) {
            std::lock_guard<std::mutex> lk(mu);
            reader_error = std::current_exception();
            cv.notify_all();
        }
    });
    auto join = [&] {
        {
            std::lock_guard<std::mutex> lk(mu);
            stop = true;
        }
        cv.notify_all();
        reader.join();
    };
    try {
        for (size_t k = 0; k < chunks.size(); k++) {
            {
                std::unique_lock<std::mutex> lk(mu);
                cv.wait(lk, [&] { return filled > k || reader_error; });
                if (filled <= k) break; // the reader failed: rethrown below
            }
            const unsigned char* buf = bufs[k % nb].get();
            for (const Piece& p : chunks[k].pieces)
                consume(p.range, p.range_off, buf + p.buf_off, p.bytes);
            {
                std::lock_guard<std::mutex> lk(mu);
                consumed = k + 1;
            }
            cv.notify_all();
        }
    } catch (...) {
        join();
        throw;
    }
    join();
    if (reader_error) std::rethrow_exception(reader_error);
    st.direct_used = direct_ok;
    return st;
}

} // namespace sof::ckpt
