// The safetensors format (Hugging Face): a fully validated reader (header from a read-only mapping)
// that widens any element range of an F32/BF16/F16 tensor to fp32 (U8 tensors, MXFP4's blocks and
// scales: read as bytes), and a streaming writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/pipelined_reader.h"

namespace sof::ckpt {

// One .safetensors file, mapped read-only. The constructor checks everything (8-byte header
// length against the file size, the JSON header, dtype and shape against each tensor's byte
// range, ranges inside the data area and not overlapping); errors name the file and the tensor.
class SafetensorsFile {
  public:
    struct Tensor {
        std::string name;
        std::string dtype;          // "F32", "BF16", "F16", "U8" (others are refused)
        std::vector<int64_t> shape; // row-major
        size_t numel = 0;
        size_t begin = 0, end = 0; // byte range inside the data area
    };

    explicit SafetensorsFile(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    const std::vector<Tensor>& tensors() const { return tensors_; }
    const Tensor* find(const std::string& name) const; // null when absent

    // out[0..n) = elements [first, first+n) of tensor, widened to fp32 (F32, BF16, F16 only).
    struct F32Read {
        const Tensor* tensor = nullptr;
        size_t first = 0, n = 0;
        float* out = nullptr; // (n)
    };

    // Performs every read in one pass over the file (read_ranges: only the requested byte
    // ranges, 32 MiB requests, the disk read overlapped with the widening, pages dropped after
    // use, so the import never holds more than the fp32 results plus the read buffers).
    ReadStats read_f32(const std::vector<F32Read>& reads, const ReadOptions& opt = {}) const;
    void read_f32(const Tensor& t, size_t first, size_t n, float* out) const {
        read_f32({F32Read{&t, first, n, out}});
    }

    // out[0..n) = elements [first, first+n) of a U8 tensor, as they are.
    void read_u8(const Tensor& t, size_t first, size_t n, uint8_t* out) const;

  private:
    std::string path_;
    const unsigned char* map_ = nullptr; // the header is parsed from the mapping
    size_t map_bytes_ = 0;
    size_t data_begin_ = 0; // 8 + header length
    std::vector<Tensor> tensors_;
};

// A tensor to write: fp32 source data (numel = product of shape).
struct SafetensorsOut {
    std::string name;
    std::vector<int64_t> shape;
    const float* data = nullptr;
};

// Writes `tensors` in order to `path` as F32 or BF16 (round to nearest even), header metadata
// {"format": "pt"}; streams the data (no whole-file buffer) and fsyncs. Io errors name the path.
void write_safetensors(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                       bool bf16);

// fp32 -> bf16 bits, round to nearest even (NaN stays NaN).
uint16_t float_to_bf16(float f);

} // namespace sof::ckpt
