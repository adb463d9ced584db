// GPT-OSS's MXFP4 expert weights (`*_blocks`, `*_scales` uint8 tensors of the hub checkpoint),
// dequantized on import to the values transformers' convert_moe_packed_tensors produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sof::ckpt {

class SafetensorsFile;

// The 16 E2M1 values (code = sign bit 3, exponent bits 2..1, mantissa bit 0), as transformers'
// FP4_VALUES lists them.
extern const float kE2M1Values[16];

// blocks (rows, groups, bytes) uint8: byte b of a group holds elements 2b (low nibble) and 2b + 1
// (high nibble); scales (rows, groups) uint8, an E8M0 exponent: element = E2M1 value *
// 2^(scale - 127). out (rows, groups * bytes * 2) fp32. Exact (every result is an E2M1 value times
// a power of two; those past fp32's range are +-inf, as in transformers), so the bf16 weights
// transformers makes by default are these values rounded without error. Scale 255 (E8M0's NaN)
// is refused: Format error naming `what`, the row and the group.
void mxfp4_dequantize(const uint8_t* blocks, const uint8_t* scales, size_t rows, size_t groups,
                      size_t bytes, float* out, const std::string& what);

// `<base>_blocks` (..., R, G, B) and `<base>_scales` (..., R, G) of a file, dequantized: returns
// (..., R, G * B * 2) row-major and sets shape. For GPT-OSS's gate_up_proj (E, 2I, G, 16) this is
// (E, 2I, H) = the engine's (E, OC, C) layout; transformers' parameter is its transpose on the last
// two axes (E, H, 2I). Errors name the file, the tensors and what does not match.
std::vector<float> read_mxfp4(const SafetensorsFile& f, const std::string& base,
                              std::vector<int64_t>* shape);

} // namespace sof::ckpt
