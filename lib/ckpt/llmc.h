// llm.c GPT-2 fp32 checkpoint files (header magic 20240326, version 3): read the header, import
// into our flat unit-major parameter layout, export from it (atomic write).
#pragma once

#include <cstdint>
#include <string>

#include "model/layout.h"

namespace sof::ckpt {

constexpr int32_t kLlmcMagic = 20240326;
constexpr int32_t kLlmcVersionFp32 = 3;
constexpr int kLlmcHeaderInts = 256; // header: 256 int32 = 1024 bytes

// Reads and validates the header: magic, version 3 (fp32), positive dims, C % NH, Vp >= V, and
// file size == 1024 + 4 * num_params. Errors (Io for missing, Format otherwise) name the file.
// Header ints: [0] magic, [1] version, [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp.
model::ArchConfig read_llmc_header(const std::string& path);

// Reads the tensors of an llm.c file into `params` (layout.num_params floats, our order).
// The file's header must describe exactly layout.cfg, else a Format error naming the field.
// llm.c order is tensor-major: wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C), qkvw (L,3C,C),
// qkvb (L,3C), attprojw (L,C,C), attprojb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C),
// fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C).
void import_llmc(const std::string& path, const model::ParamLayout& layout, float* params);

// Writes `params` (layout.num_params floats, our order) as an llm.c version-3 file: written to
// path + ".tmp", fsynced, renamed over `path`. cfg must equal layout.cfg.
void export_llmc(const std::string& path, const model::ArchConfig& cfg,
                 const model::ParamLayout& layout, const float* params);

// Number of GPT-2 parameters for cfg, computed in double so corrupt (huge) dims cannot overflow;
// equals make_layout(cfg).num_params for valid configs.
double llmc_param_count(const model::ArchConfig& cfg);

// Element offset of tensor `kind` of block `layer` (layer ignored for wte/wpe/lnfw/lnfb) in the
// llm.c file's parameter area (after the header). Exposed for tests and tools.
size_t llmc_offset(const model::ArchConfig& cfg, model::TensorKind kind, int layer);

} // namespace sof::ckpt
