// GPT-2 parameter layout: the tensor table over one flat fp32 buffer, unit boundaries, validation.
// Unit-major order: unit 0 = wte, wpe; unit 1+l = block l (llm.c tensor order); unit L+1 = lnfw,
// lnfb.
#include "model/layout.h"

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::model {

const char* tensor_kind_name(TensorKind k) {
    switch (k) {
    case TensorKind::Wte:
        return "wte";
    case TensorKind::Wpe:
        return "wpe";
    case TensorKind::Ln1w:
        return "ln1w";
    case TensorKind::Ln1b:
        return "ln1b";
    case TensorKind::Qkvw:
        return "qkvw";
    case TensorKind::Qkvb:
        return "qkvb";
    case TensorKind::Attprojw:
        return "attprojw";
    case TensorKind::Attprojb:
        return "attprojb";
    case TensorKind::Ln2w:
        return "ln2w";
    case TensorKind::Ln2b:
        return "ln2b";
    case TensorKind::Fcw:
        return "fcw";
    case TensorKind::Fcb:
        return "fcb";
    case TensorKind::Fcprojw:
        return "fcprojw";
    case TensorKind::Fcprojb:
        return "fcprojb";
    case TensorKind::Lnfw:
        return "lnfw";
    case TensorKind::Lnfb:
        return "lnfb";
    case TensorKind::Pad:
        return "pad";
    }
    return "?";
}

void validate(const GPT2Config& cfg) {
    auto positive = [](int v, const char* field) {
        if (v <= 0) SOF_FAIL(Config, "model.%s = %d must be positive (> 0)", field, v);
    };
    positive(cfg.max_seq_len, "max_seq_len");
    positive(cfg.vocab_size, "vocab_size");
    positive(cfg.padded_vocab_size, "padded_vocab_size");
    positive(cfg.num_layers, "num_layers");
    positive(cfg.num_heads, "num_heads");
    positive(cfg.channels, "channels");
    if (cfg.padded_vocab_size < cfg.vocab_size)
        SOF_FAIL(Config,
                 "model.padded_vocab_size = %d is smaller than model.vocab_size = %d; set it to "
                 "vocab_size rounded up (e.g. to a multiple of 128)",
                 cfg.padded_vocab_size, cfg.vocab_size);
    if (cfg.channels % cfg.num_heads != 0)
        SOF_FAIL(Config,
                 "model.channels = %d is not divisible by model.num_heads = %d; choose channels as "
                 "a multiple of num_heads",
                 cfg.channels, cfg.num_heads);
    // every tensor's numel and the flat offsets are size_t, but shapes are int: keep 4C*C in int
    if (4.0 * cfg.channels * cfg.channels > 2147483647.0)
        SOF_FAIL(Config, "model.channels = %d is too large (4*C*C must fit in 32 bits)",
                 cfg.channels);
}

namespace {

struct TensorSpec {
    TensorKind kind;
    std::vector<int> shape;
    bool decay;
};

std::vector<TensorSpec> block_specs(const GPT2Config& cfg) {
    const int C = cfg.channels;
    return {
        {TensorKind::Ln1w, {C}, false},          {TensorKind::Ln1b, {C}, false},
        {TensorKind::Qkvw, {3 * C, C}, true},    {TensorKind::Qkvb, {3 * C}, false},
        {TensorKind::Attprojw, {C, C}, true},    {TensorKind::Attprojb, {C}, false},
        {TensorKind::Ln2w, {C}, false},          {TensorKind::Ln2b, {C}, false},
        {TensorKind::Fcw, {4 * C, C}, true},     {TensorKind::Fcb, {4 * C}, false},
        {TensorKind::Fcprojw, {C, 4 * C}, true}, {TensorKind::Fcprojb, {C}, false},
    };
}

} // namespace

ParamLayout make_layout(const GPT2Config& cfg) {
    validate(cfg);
    ParamLayout lay;
    lay.cfg = cfg;
    const int L = cfg.num_layers, C = cfg.channels;
    size_t off = 0;
    auto add = [&](const TensorSpec& s, int layer, int unit) {
        TensorInfo t;
        t.kind = s.kind;
        t.layer = layer;
        t.unit = unit;
        t.offset = off;
        t.numel = 1;
        for (int d : s.shape)
            t.numel *= static_cast<size_t>(d);
        t.shape = s.shape;
        t.decay = s.decay;
        t.name = layer >= 0 ? core::strfmt("h%d.%s", layer, tensor_kind_name(s.kind))
                            : std::string(tensor_kind_name(s.kind));
        off += t.numel;
        lay.tensors.push_back(std::move(t));
    };
    lay.unit_begin.push_back(off);
    add({TensorKind::Wte, {cfg.padded_vocab_size, C}, true}, -1, 0);
    add({TensorKind::Wpe, {cfg.max_seq_len, C}, true}, -1, 0);
    const std::vector<TensorSpec> blk = block_specs(cfg);
    for (int l = 0; l < L; l++) {
        lay.unit_begin.push_back(off);
        for (const TensorSpec& s : blk)
            add(s, l, 1 + l);
    }
    lay.unit_begin.push_back(off);
    add({TensorKind::Lnfw, {C}, false}, -1, L + 1);
    add({TensorKind::Lnfb, {C}, false}, -1, L + 1);
    lay.unit_begin.push_back(off);
    lay.num_params = off;
    return lay;
}

size_t ParamLayout::offset_of(TensorKind kind, int layer) const {
    switch (kind) {
    case TensorKind::Wte:
        return tensors[0].offset;
    case TensorKind::Wpe:
        return tensors[1].offset;
    case TensorKind::Lnfw:
        return tensors[tensors.size() - 2].offset;
    case TensorKind::Lnfb:
        return tensors[tensors.size() - 1].offset;
    default:
        break;
    }
    if (layer < 0 || layer >= cfg.num_layers)
        SOF_FAIL(Internal, "offset_of(%s, layer %d): layer out of range [0, %d)",
                 tensor_kind_name(kind), layer, cfg.num_layers);
    // block tensors are the 12 kinds Ln1w..Fcprojb, in enum order
    const int idx = 2 + layer * 12 + (static_cast<int>(kind) - static_cast<int>(TensorKind::Ln1w));
    return tensors[static_cast<size_t>(idx)].offset;
}

} // namespace sof::model
