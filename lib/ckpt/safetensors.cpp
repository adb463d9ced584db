// safetensors reader (mmap, validation, dtype widening per element range) and streaming writer.
// Format: u64 LE header length N, N bytes of JSON header, then the data area.
#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>
#include <nlohmann/json.hpp>

#include "ckpt/fileio.h"
#include "core/error.h"

namespace sof::ckpt {

namespace {

size_t dtype_bytes(const std::string& d) {
    if (d == "F32") return 4;
    if (d == "BF16" || d == "F16") return 2;
    return 0;
}

float bf16_to_float(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

float f16_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { // subnormal: normalize
            int e = -1;
            uint32_t m = man;
            do {
                e++;
                m <<= 1;
            } while ((m & 0x400u) == 0);
            u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | man << 13;
    } else {
        u = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

} // namespace

uint16_t float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u); // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) SOF_FAIL(Io, "cannot open '%s': %s", path.c_str(), std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        SOF_FAIL(Io, "'%s' is not a regular file", path.c_str());
    }
    map_bytes_ = static_cast<size_t>(st.st_size);
    if (map_bytes_ < 8) {
        ::close(fd);
        SOF_FAIL(Format, "'%s': %zu bytes is too short for a safetensors file (truncated?)",
                 path.c_str(), map_bytes_);
    }
    void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        ::close(fd);
        SOF_FAIL(Io, "cannot map '%s': %s", path.c_str(), std::strerror(errno));
    }
    fd_ = fd;
    map_ = static_cast<const unsigned char*>(m);
    try {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | map_[i];
        if (n < 2 || n > map_bytes_ - 8 || n > (uint64_t{100} << 20))
            SOF_FAIL(Format,
                     "'%s': header length %llu does not fit the file of %zu bytes (truncated or "
                     "not a safetensors file)",
                     path.c_str(), static_cast<unsigned long long>(n), map_bytes_);
        data_begin_ = 8 + static_cast<size_t>(n);
        nlohmann::json h = nlohmann::json::parse(map_ + 8, map_ + data_begin_, nullptr, false);
        if (h.is_discarded() || !h.is_object())
            SOF_FAIL(Format, "'%s': the header is not a JSON object", path.c_str());
        const size_t data_bytes = map_bytes_ - data_begin_;
        for (auto it = h.begin(); it != h.end(); ++it) {
            if (it.key() == "__metadata__") continue;
            const nlohmann::json& e = it.value();
            Tensor t;
            t.name = it.key();
            const char* who = t.name.c_str();
            if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
                !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
                !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
                SOF_FAIL(Format, "'%s': tensor '%s' needs dtype, shape and data_offsets [b, e]",
                         path.c_str(), who);
            t.dtype = e["dtype"].get<std::string>();
            const size_t eb = dtype_bytes(t.dtype);
            if (eb == 0)
                SOF_FAIL(Format, "'%s': tensor '%s' has dtype %s; supported: F32, BF16, F16",
                         path.c_str(), who, t.dtype.c_str());
            t.numel = 1;
            for (const nlohmann::json& d : e["shape"]) {
                if (!d.is_number_integer() || d.get<int64_t>() < 0)
                    SOF_FAIL(Format, "'%s': tensor '%s' has a bad shape entry", path.c_str(), who);
                t.shape.push_back(d.get<int64_t>());
                t.numel *= static_cast<size_t>(d.get<int64_t>());
            }
            const nlohmann::json& o = e["data_offsets"];
            if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned())
                SOF_FAIL(Format, "'%s': tensor '%s' has bad data_offsets", path.c_str(), who);
            t.begin = o[0].get<size_t>();
            t.end = o[1].get<size_t>();
            if (t.end < t.begin || t.end > data_bytes)
                SOF_FAIL(Format,
                         "'%s': tensor '%s' data [%zu, %zu) is outside the %zu-byte data area "
                         "(truncated file?)",
                         path.c_str(), who, t.begin, t.end, data_bytes);
            if (t.end - t.begin != t.numel * eb)
                SOF_FAIL(Format,
                         "'%s': tensor '%s' has %zu bytes but dtype %s and its shape need %zu",
                         path.c_str(), who, t.end - t.begin, t.dtype.c_str(), t.numel * eb);
            tensors_.push_back(std::move(t));
        }
        std::vector<const Tensor*> order;
        for (const Tensor& t : tensors_)
            order.push_back(&t);
        std::sort(order.begin(), order.end(),
                  [](const Tensor* a, const Tensor* b) { return a->begin < b->begin; });
        for (size_t i = 1; i < order.size(); i++)
            if (order[i]->begin < order[i - 1]->end)
                SOF_FAIL(Format, "'%s': tensors '%s' and '%s' overlap in the data area",
                         path.c_str(), order[i - 1]->name.c_str(), order[i]->name.c_str());
    } catch (...) {
        ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
        ::close(fd_);
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() {
    if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    if (fd_ >= 0) ::close(fd_);
}

const SafetensorsFile::Tensor* SafetensorsFile::find(const std::string& name) const {
    for (const Tensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

void SafetensorsFile::read_f32(const Tensor& t, size_t first, size_t n, float* out) const {
    if (first + n > t.numel)
        SOF_FAIL(Internal, "'%s': read of elements [%zu, %zu) of '%s' (%zu elements)",
                 path_.c_str(), first, first + n, t.name.c_str(), t.numel);
    const size_t eb = dtype_bytes(t.dtype);
    const bool bf = t.dtype == "BF16";
    // pread in 32 MiB chunks into a bounce buffer (as fast as a sequential `dd`; page faults on
    // the mapping cost 3-5x that), widen, and drop the chunk from the page cache: the import never
    // holds more than the fp32 result plus one chunk
    const size_t chunk = (size_t(32) << 20) / eb;
    std::vector<unsigned char> buf(std::min(chunk, n) * eb);
    for (size_t c0 = 0; c0 < n; c0 += chunk) {
        const size_t cn = std::min(chunk, n - c0);
        const off_t off = static_cast<off_t>(data_begin_ + t.begin + (first + c0) * eb);
        if (c0 + cn < n) // the kernel reads the next chunk ahead while this one is widened
            ::posix_fadvise(fd_, off + static_cast<off_t>(cn * eb),
                            static_cast<off_t>(std::min(chunk, n - c0 - cn) * eb),
                            POSIX_FADV_WILLNEED);
        size_t got = 0;
        while (got < cn * eb) {
            const ssize_t r =
                ::pread(fd_, buf.data() + got, cn * eb - got, off + static_cast<off_t>(got));
            if (r <= 0)
                SOF_FAIL(Io, "'%s': reading tensor '%s' failed: %s", path_.c_str(), t.name.c_str(),
                         r == 0 ? "unexpected end of file" : std::strerror(errno));
            got += static_cast<size_t>(r);
        }
        ::posix_fadvise(fd_, off, static_cast<off_t>(cn * eb), POSIX_FADV_DONTNEED);
        float* o = out + c0;
        const unsigned char* src = buf.data();
        if (t.dtype == "F32") {
            std::memcpy(o, src, cn * 4);
        } else {
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < cn; i++) {
                uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                o[i] = bf ? bf16_to_float(h) : f16_to_float(h);
            }
        }
    }
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                       bool bf16) {
    nlohmann::json h = nlohmann::json::object();
    h["__metadata__"] = {{"format", "pt"}};
    const size_t eb = bf16 ? 2 : 4;
    size_t off = 0;
    for (const SafetensorsOut& t : tensors) {
        size_t n = 1;
        for (int64_t d : t.shape)
            n *= static_cast<size_t>(d);
        h[t.name] = {{"dtype", bf16 ? "BF16" : "F32"},
                     {"shape", t.shape},
                     {"data_offsets", {off, off + n * eb}}};
        off += n * eb;
    }
    std::string hs = h.dump();
    hs.append((8 - hs.size() % 8) % 8, ' '); // data area 8-byte aligned
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = static_cast<unsigned char>(static_cast<uint64_t>(hs.size()) >> (8 * i));
    DurableWriter w(path);
    w.write(len, 8);
    w.write(hs.data(), hs.size());
    std::vector<uint16_t> buf(size_t(1) << 20);
    for (const SafetensorsOut& t : tensors) {
        size_t n = 1;
        for (int64_t d : t.shape)
            n *= static_cast<size_t>(d);
        if (!bf16) {
            w.write(t.data, n * 4);
            continue;
        }
        for (size_t i = 0; i < n; i += buf.size()) {
            const size_t k = std::min(buf.size(), n - i);
            for (size_t j = 0; j < k; j++)
                buf[j] = float_to_bf16(t.data[i + j]);
            w.write(buf.data(), k * 2);
        }
    }
    w.finish();
}

} // namespace sof::ckpt
