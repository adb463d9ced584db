// Hugging Face model directories: config.json <-> ArchConfig, import of (sharded) safetensors into
// fp32 master weights (a ZeRO-3 rank reads only its shard), and atomic export for from_pretrained.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/pipelined_reader.h"
#include "model/layout.h"
#include "zero/shard.h"

namespace sof::ckpt {

// A directory holding config.json.
bool is_hf_dir(const std::string& path);

// Reads DIR/config.json (LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM). Format errors
// name the file and the key; an unsupported architecture lists the supported ones.
model::ArchConfig read_hf_config(const std::string& dir);

// Reads every tensor of `full` from DIR's model.safetensors, or the shards listed in
// model.safetensors.index.json, into `out` (map.local_size floats: this rank's shard layout;
// make_shard_map(full, 1, 0) is the whole flat buffer). Only the elements of this rank's slices
// are read, each file in one pass (read_ranges: 32 MiB reads overlapped with the widening);
// padding rows (V..Vp-1) and shard padding are zero. A missing or unexpected tensor, a
// shape or dtype mismatch or a truncated file is one error naming the file and the tensor.
struct ImportStats {
    uint64_t bytes_read = 0;  // from the safetensors files
    int files = 0;            // files read
    bool direct_used = false; // every read bypassed the page cache (O_DIRECT)
};
ImportStats import_hf(const std::string& dir, const model::ParamLayout& full,
                      const zero::ShardMap& map, float* out, const ReadOptions& opt = {});

struct HfExportOptions {
    std::string dtype = "bf16";           // "bf16" or "fp32"
    uint64_t shard_bytes = 5000000000ull; // largest safetensors file (a tensor is never split)
    // The Hugging Face directory the model came from (model.init_from), or "": its tokenizer
    // files and generation_config.json are copied (kHfSideFiles, those that exist) and config.json
    // keeps its bos/eos/pad token ids.
    std::string source_dir;
};

// The files of a Hugging Face directory that travel with the weights on export.
extern const char* const kHfSideFiles[];
extern const int kHfSideFileCount;

// Rounds params[i] (i: the element's number in the run's flat parameter space) stochastically to
// bf16 as the bf16 master's step does (optim/qstate.h: up with the probability of the dropped
// fraction, Philox keyed by seed, step and i) and widens it back, so a bf16 export writes it
// unchanged: export --hf --dtype bf16 --rounding stochastic. Exact bf16 values stay as they are.
// Rounding to nearest drops every change smaller than half a bf16 step since the weight was last
// a bf16 value: most of a small-lr fine-tune (docs/checkpoints.md, "bf16 export").
void round_bf16_stochastic(float* params, size_t n, uint64_t seed, int64_t step);

// Writes config.json, model.safetensors or model-0000N-of-0000M.safetensors + index (padding rows
// stripped) for `layout` (full, LLaMA family) into out_dir atomically: a temporary directory
// next to it, renamed at the end. out_dir must not exist or be an empty directory.
void export_hf(const std::string& out_dir, const model::ParamLayout& layout, const float* params,
               const HfExportOptions& o);

} // namespace sof::ckpt
