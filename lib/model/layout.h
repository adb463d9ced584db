// GPT-2 parameter layout: config, tensor table and units over one flat fp32 buffer.
// Layout is unit-major (embeddings, block 0..L-1, final LN) so backward order = reverse offsets.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sof::model {

struct GPT2Config {
    int max_seq_len = 1024;        // maxT
    int vocab_size = 50257;        // V
    int padded_vocab_size = 50304; // Vp >= V (rows V..Vp-1 of wte are padding)
    int num_layers = 12;           // L
    int num_heads = 12;            // NH
    int channels = 768;            // C
};

enum class TensorKind {
    Wte,      // (Vp, C)
    Wpe,      // (maxT, C)
    Ln1w,     // (C)
    Ln1b,     // (C)
    Qkvw,     // (3C, C)
    Qkvb,     // (3C)
    Attprojw, // (C, C)
    Attprojb, // (C)
    Ln2w,     // (C)
    Ln2b,     // (C)
    Fcw,      // (4C, C)
    Fcb,      // (4C)
    Fcprojw,  // (C, 4C)
    Fcprojb,  // (C)
    Lnfw,     // (C)
    Lnfb,     // (C)
    Pad,      // (n) ZeRO-3 shard padding (shard layouts only; not a model tensor)
};
constexpr int kNumTensorKinds = 16;         // the model's kinds (Pad excluded)
const char* tensor_kind_name(TensorKind k); // llm.c names: "wte", "qkvw", ...

struct TensorInfo {
    std::string name; // "wte", "h3.qkvw", "lnfw"
    TensorKind kind;
    int layer;     // block index, -1 for wte/wpe/lnf
    int unit;      // 0 = embeddings, 1+layer = block, L+1 = final LN
    size_t offset; // into the flat buffer, in elements
    size_t numel;
    std::vector<int> shape; // row-major
    bool decay;             // weight decay applies (matrices, embeddings), not biases/norms
};

struct ParamLayout {
    GPT2Config cfg;
    std::vector<TensorInfo> tensors; // in flat-buffer order
    std::vector<size_t> unit_begin;  // (L+3): unit u spans [unit_begin[u], unit_begin[u+1])
    size_t num_params = 0;
    int num_units() const { return static_cast<int>(unit_begin.size()) - 1; }
    // offset of tensor `kind` in block `layer` (layer ignored for wte/wpe/lnf)
    size_t offset_of(TensorKind kind, int layer) const;
};

ParamLayout make_layout(const GPT2Config& cfg);

// Throws a Config error naming the bad field when the config is inconsistent
// (C % NH, Vp < V, non-positive sizes).
void validate(const GPT2Config& cfg);

} // namespace sof::model
