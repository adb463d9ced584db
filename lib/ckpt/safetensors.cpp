// safetensors reader (mmap, validation, dtype widening per element range) and streaming writer.
// Format: u64 LE header length N, N bytes of JSON header, then the data area.
#include "ckpt/safetensors.h"

#include "core/dtype.h"

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
#include "core/input_file.h"

namespace sof::ckpt {

namespace {

size_t dtype_bytes(const std::string& d) {
    if (d == "F32") return 4;
    if (d == "BF16" || d == "F16") return 2;
    if (d == "U8") return 1;
    return 0;
}

} // namespace

uint16_t float_to_bf16(float f) {
    return core::f32_to_bf16(f);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    std::string why;
    uint64_t size = 0;
    const int fd = core::open_regular(path, &size, &why);
    if (fd < 0) SOF_FAIL(Io, "cannot open '%s': %s", path.c_str(), why.c_str());
    map_bytes_ = static_cast<size_t>(size);
    if (map_bytes_ < 8) {
        ::close(fd);
        SOF_FAIL(Format, "'%s': %zu bytes is too short for a safetensors file (truncated?)",
                 path.c_str(), map_bytes_);
    }
    void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    ::close(fd); // the mapping keeps the file; data reads open their own descriptors
    if (m == MAP_FAILED)
        SOF_FAIL(Io, "cannot map '%s': %s", path.c_str(), std::strerror(map_errno));
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
                SOF_FAIL(Format, "'%s': tensor '%s' has dtype %s; supported: F32, BF16, F16, U8",
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
        // the tensors tile the data area exactly (as the format requires): a header length that
        // is off by a few bytes of padding shifts every tensor and is caught here
        size_t at = 0;
        for (const Tensor* t : order) {
            if (t->begin != at)
                SOF_FAIL(Format,
                         "'%s': bytes [%zu, %zu) of the data area (which starts at byte %zu = 8 + "
                         "header length %llu) belong to no tensor (next: '%s'); the header length "
                         "or the data_offsets are wrong: the file is corrupt",
                         path.c_str(), at, t->begin, data_begin_,
                         static_cast<unsigned long long>(n), t->name.c_str());
            at = t->end;
        }
        if (at != data_bytes)
            SOF_FAIL(Format,
                     "'%s': the tensors end at byte %zu of the %zu-byte data area (which starts "
                     "at byte %zu = 8 + header length %llu): %zu bytes belong to no tensor; the "
                     "header length is wrong or bytes were appended: the file is corrupt",
                     path.c_str(), at, data_bytes, data_begin_, static_cast<unsigned long long>(n),
                     data_bytes - at);
    } catch (...) {
        ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() {
    if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

const SafetensorsFile::Tensor* SafetensorsFile::find(const std::string& name) const {
    for (const Tensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

ReadStats SafetensorsFile::read_f32(const std::vector<F32Read>& reads,
                                    const ReadOptions& opt) const {
    std::vector<ByteRange> ranges;
    for (const F32Read& r : reads) {
        const Tensor& t = *r.tensor;
        if (r.first + r.n > t.numel)
            SOF_FAIL(Internal, "'%s': read of elements [%zu, %zu) of '%s' (%zu elements)",
                     path_.c_str(), r.first, r.first + r.n, t.name.c_str(), t.numel);
        if (t.dtype == "U8")
            SOF_FAIL(Format,
                     "'%s': tensor '%s' is U8 (MXFP4 blocks or scales?); it has no fp32 values "
                     "(read it with read_u8, dequantize with ckpt/mxfp4.h)",
                     path_.c_str(), t.name.c_str());
        const size_t eb = dtype_bytes(t.dtype);
        const uint64_t b = data_begin_ + t.begin + r.first * eb;
        ranges.push_back({b, b + r.n * eb, eb, t.name});
    }
    auto widen = [&](size_t i, uint64_t off, const unsigned char* src, size_t bytes) {
        const Tensor& t = *reads[i].tensor;
        if (t.dtype == "F32") {
            std::memcpy(reinterpret_cast<unsigned char*>(reads[i].out) + off, src, bytes);
            return;
        }
        float* o = reads[i].out + off / 2;
        const size_t n = bytes / 2;
        const bool bf = t.dtype == "BF16";
#pragma omp parallel for schedule(static) if (n > (size_t(1) << 16))
        for (size_t k = 0; k < n; k++) {
            uint16_t h;
            std::memcpy(&h, src + 2 * k, 2);
            o[k] = bf ? core::bf16_to_f32(h) : core::f16_to_f32(h);
        }
    };
    return read_ranges(path_, ranges, widen, opt);
}

void SafetensorsFile::read_u8(const Tensor& t, size_t first, size_t n, uint8_t* out) const {
    if (t.dtype != "U8")
        SOF_FAIL(Internal, "'%s': read_u8 of tensor '%s', which is %s", path_.c_str(),
                 t.name.c_str(), t.dtype.c_str());
    if (first + n > t.numel)
        SOF_FAIL(Internal, "'%s': read of elements [%zu, %zu) of '%s' (%zu elements)",
                 path_.c_str(), first, first + n, t.name.c_str(), t.numel);
    if (n == 0) return;
    const uint64_t b = data_begin_ + t.begin + first;
    auto copy = [&](size_t, uint64_t off, const unsigned char* src, size_t bytes) {
        std::memcpy(out + off, src, bytes);
    };
    read_ranges(path_, {{b, b + n, 1, t.name}}, copy, ReadOptions{});
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
