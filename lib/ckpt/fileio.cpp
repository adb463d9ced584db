// Durable file I/O for checkpoints (POSIX open/write/fsync/rename) and the FNV-1a 64 checksum.
// Every failure throws core::Error(Io) with the path and strerror(errno).
#include "ckpt/fileio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"

namespace sof::ckpt {

namespace fs = std::filesystem;

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    uint64_t h = seed;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string checksum_hex(uint64_t h) {
    return core::strfmt("%016llx", static_cast<unsigned long long>(h));
}

uint64_t block_checksum(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    const size_t nb = bytes == 0 ? 1 : (bytes + kChecksumBlock - 1) / kChecksumBlock;
    std::vector<uint64_t> hs(nb); // (nb) per-block FNV-1a 64
    auto hash_blocks = [&](size_t first, size_t stride) {
        for (size_t b = first; b < nb; b += stride) {
            const size_t begin = b * kChecksumBlock;
            const size_t len = std::min(kChecksumBlock, bytes - std::min(bytes, begin));
            hs[b] = fnv1a64(p + std::min(bytes, begin), len);
        }
    };
    const size_t hw = std::max(1u, std::thread::hardware_concurrency());
    const size_t nt = std::min<size_t>({nb, hw, 32});
    if (nt <= 1) {
        hash_blocks(0, 1);
    } else {
        std::vector<std::thread> pool;
        try {
            for (size_t t = 1; t < nt; t++)
                pool.emplace_back(hash_blocks, t, nt);
        } catch (const std::system_error&) {
            // cannot start threads: the ones running finish their blocks, we do the rest
        }
        const size_t started = pool.size() + 1;
        hash_blocks(0, nt);
        for (size_t t = started; t < nt; t++)
            hash_blocks(t, nt);
        for (std::thread& th : pool)
            th.join();
    }
    unsigned char le[8];
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t v : hs) {
        for (int k = 0; k < 8; k++)
            le[k] = static_cast<unsigned char>(v >> (8 * k));
        h = fnv1a64(le, 8, h);
    }
    return h;
}

namespace {

// Closes a descriptor on scope exit (errors from close after fsync are ignored: data is synced).
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

} // namespace

DurableWriter::DurableWriter(const std::string& path) : path_(path) {
    // O_NONBLOCK: an existing FIFO at the path fails (ENXIO) instead of waiting for a reader
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
                 0644);
    if (fd_ < 0)
        SOF_FAIL(Io, "cannot create %s: %s (check that the directory exists and is writable)",
                 path.c_str(), std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        fd_ = -1;
        SOF_FAIL(Io, "cannot write %s: it is not a regular file (a FIFO, socket or device)",
                 path.c_str());
    }
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

DurableWriter::~DurableWriter() {
    if (fd_ >= 0) ::close(fd_);
}

void DurableWriter::write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    size_t left = bytes;
    while (left > 0) {
        ssize_t n = ::write(fd_, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            SOF_FAIL(Io, "cannot write %s: %s (is the disk full?)", path_.c_str(),
                     std::strerror(errno));
        }
        p += n;
        left -= static_cast<size_t>(n);
    }
}

void DurableWriter::finish() {
    if (::fsync(fd_) != 0) SOF_FAIL(Io, "cannot fsync %s: %s", path_.c_str(), std::strerror(errno));
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) SOF_FAIL(Io, "cannot close %s: %s", path_.c_str(), std::strerror(errno));
}

void write_file_durable(const std::string& path, const void* data, size_t bytes) {
    DurableWriter w(path);
    w.write(data, bytes);
    w.finish();
}

void fsync_dir(const std::string& dir) {
    Fd f;
    f.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f.fd < 0) SOF_FAIL(Io, "cannot open directory %s: %s", dir.c_str(), std::strerror(errno));
    if (::fsync(f.fd) != 0)
        SOF_FAIL(Io, "cannot fsync directory %s: %s", dir.c_str(), std::strerror(errno));
}

uint64_t file_size_checked(const std::string& path, const char* what) {
    uint64_t size = 0;
    std::string why;
    const int fd = core::open_regular(path, &size, &why);
    if (fd < 0)
        SOF_FAIL(Io, "%s %s: %s", what, path.c_str(),
                 why == "no such file" ? "file not found (check the path)" : why.c_str());
    ::close(fd);
    return size;
}

void read_exact(const std::string& path, void* out, size_t bytes, uint64_t offset) {
    core::InputFile f(path, "cannot open");
    f.read_at(out, bytes, offset);
}

std::string read_text(const std::string& path, const char* what) {
    core::InputFile f(path, what);
    const uint64_t n = f.size();
    if (n > (64ull << 20))
        SOF_FAIL(Format, "%s %s is %llu bytes, too large for a text file of this kind", what,
                 path.c_str(), static_cast<unsigned long long>(n));
    std::string s(static_cast<size_t>(n), '\0');
    f.read_at(s.data(), s.size(), 0);
    return s;
}

size_t first_non_finite(const float* v, size_t n) {
    size_t first = n;
#pragma omp parallel for schedule(static) reduction(min : first) if (n > (size_t(1) << 20))
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(v[i]) && i < first) first = i;
    return first;
}

std::string index_in_shape(size_t flat, const std::vector<int64_t>& shape) {
    std::vector<size_t> at(shape.size(), 0);
    for (size_t d = shape.size(); d-- > 0;) {
        const size_t extent = shape[d] > 0 ? static_cast<size_t>(shape[d]) : 1;
        at[d] = flat % extent;
        flat /= extent;
    }
    std::string s = "[";
    for (size_t d = 0; d < at.size(); d++)
        s += (d ? ", " : "") + std::to_string(at[d]);
    return s + "]";
}

void write_file_atomic(const std::string& path, const void* data, size_t bytes, const char* what) {
    core::check_output_target(path, what); // never renamed over a FIFO or a device
    const std::string tmp = path + ".tmp";
    write_file_durable(tmp, data, bytes);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        SOF_FAIL(Io, "cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(e));
    }
    fs::path parent = fs::path(path).parent_path();
    fsync_dir(parent.empty() ? std::string(".") : parent.string());
}

} // namespace sof::ckpt
