// GPT-OSS's experts in its Hugging Face files: (E, X, R) tensors, the transpose on the last two
// axes of our (E, R, X) parameters; the import's reads of a rank's slice and the export's copy.
#pragma once

#include <cstddef>
#include <vector>

#include "ckpt/safetensors.h"

namespace sof::ckpt {

// One expert's (X, R) block read in file order, transposed into the parameter after the read.
struct TransposedRead {
    std::vector<float> own; // (X * R) the block, when the slice holds part of the expert; else
                            // empty: read in place (buf = dst)
    float* buf = nullptr;   // (X * R) where the block is read
    float* dst = nullptr;   // our (R, X) elements [from, from + n) of the expert go here
    size_t from = 0, n = 0, R = 0, X = 0;
};

// The reads of our flat elements [first, last) of the transposed file tensor `st` (E, X, R)
// into dst[0, last - first): whole experts, each read once; `fix` gets what to transpose after.
void plan_transposed_reads(const SafetensorsFile::Tensor* st, size_t first, size_t last, float* dst,
                           std::vector<SafetensorsFile::F32Read>* reads,
                           std::vector<TransposedRead>* fix);
// After the reads: every planned block transposed into its place.
void finish_transposed_reads(std::vector<TransposedRead>* fix);

// out (E, X, R) = src (E, R, X) with the last two axes swapped.
void transpose_experts(const float* src, size_t E, size_t R, size_t X, float* out);

} // namespace sof::ckpt
