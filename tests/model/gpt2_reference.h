// Reader for tests/data/gpt2_ref.bin (written by scripts/make_reference.py, format version 1):
// a tiny GPT-2's inputs, logits, loss, grads and 10 AdamW steps in PyTorch float64, stored as fp32.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/layout.h"

namespace sof::testing {

// One stored tensor in llm.c shape (block tensors stacked over layers: qkvw is (L, 3C, C)).
struct RefTensor {
    std::vector<int64_t> shape;
    std::vector<float> data; // prod(shape)
};

struct Gpt2Reference {
    model::ArchConfig config;
    int B = 0, T = 0; // batch of the stored forward/backward and of every training step
    int steps = 0;    // optimizer steps in train_losses/final
    double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, grad_clip = 0;
    std::vector<int> inputs;                       // (B,T)
    std::vector<int> targets;                      // (B,T)
    std::vector<float> logits;                     // (B,T,Vp), padded columns included
    float loss = 0;                                // mean cross-entropy at the initial params
    std::map<std::string, RefTensor> params;       // initial, by llm.c name ("wte", "qkvw", ...)
    std::map<std::string, RefTensor> grads;        // d loss / d params at the initial params
    std::map<std::string, RefTensor> final_params; // after `steps` AdamW steps
    // per-element spread of final_params when every step's grads get fp32-sized errors: how far
    // an exact fp32 implementation may land from final_params (Adam amplifies small-grad errors)
    std::map<std::string, RefTensor> final_sens;
    std::vector<float> train_losses; // (steps) loss before each step
    std::vector<float> train_norms;  // (steps) global grad norm before clipping
};

namespace detail {

class RefReader {
  public:
    RefReader(const std::string& path, std::vector<char> bytes)
        : path_(path), bytes_(std::move(bytes)) {}
    void read(void* dst, size_t n, const char* what) {
        if (n > bytes_.size() - pos_)
            SOF_FAIL(Io,
                     "%s: truncated at byte %zu while reading %s (%zu bytes needed, %zu left); "
                     "regenerate it with /usr/bin/python3 scripts/make_reference.py %s",
                     path_.c_str(), pos_, what, n, bytes_.size() - pos_, path_.c_str());
        std::memcpy(dst, bytes_.data() + pos_, n);
        pos_ += n;
    }
    template <typename V> V get(const char* what) {
        V v;
        read(&v, sizeof v, what);
        return v;
    }
    size_t pos() const { return pos_; }
    size_t size() const { return bytes_.size(); }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    std::vector<char> bytes_;
    size_t pos_ = 0;
};

inline std::vector<char> read_all(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        SOF_FAIL(Io,
                 "cannot open GPT-2 reference file %s; generate it with /usr/bin/python3 "
                 "scripts/make_reference.py tests/data/gpt2_ref.bin",
                 path.c_str());
    std::vector<char> out;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        out.insert(out.end(), buf, buf + n);
    const bool err = std::ferror(f) != 0;
    std::fclose(f);
    if (err) SOF_FAIL(Io, "error while reading GPT-2 reference file %s", path.c_str());
    return out;
}

} // namespace detail

// Loads and checks a reference file. Throws sof::core::Error (Io) naming the file and what is
// wrong.
inline Gpt2Reference load_gpt2_reference(const std::string& path) {
    detail::RefReader r(path, detail::read_all(path));
    char magic[8];
    r.read(magic, 8, "magic");
    if (std::memcmp(magic, "SOFGPT2R", 8) != 0)
        SOF_FAIL(Io, "%s is not a GPT-2 reference file (magic is not SOFGPT2R)", path.c_str());
    const uint32_t version = r.get<uint32_t>("version");
    if (version != 1)
        SOF_FAIL(Io,
                 "%s has format version %u, this reader understands version 1; regenerate it "
                 "with scripts/make_reference.py",
                 path.c_str(), version);
    Gpt2Reference ref;
    model::ArchConfig& c = ref.config;
    c.max_seq_len = r.get<int32_t>("max_seq_len");
    c.vocab_size = r.get<int32_t>("vocab_size");
    c.padded_vocab_size = r.get<int32_t>("padded_vocab_size");
    c.num_layers = r.get<int32_t>("num_layers");
    c.num_heads = r.get<int32_t>("num_heads");
    c.channels = r.get<int32_t>("channels");
    ref.B = r.get<int32_t>("B");
    ref.T = r.get<int32_t>("T");
    ref.steps = r.get<int32_t>("steps");
    ref.lr = r.get<double>("lr");
    ref.beta1 = r.get<double>("beta1");
    ref.beta2 = r.get<double>("beta2");
    ref.eps = r.get<double>("eps");
    ref.weight_decay = r.get<double>("weight_decay");
    ref.grad_clip = r.get<double>("grad_clip");
    if (ref.B <= 0 || ref.T <= 0 || ref.steps < 0 || ref.T > c.max_seq_len)
        SOF_FAIL(Io, "%s: bad batch header B=%d T=%d steps=%d (max_seq_len %d)", path.c_str(),
                 ref.B, ref.T, ref.steps, c.max_seq_len);
    const uint32_t ntensors = r.get<uint32_t>("tensor count");
    std::map<std::string, RefTensor> f32;
    std::map<std::string, std::vector<int>> i32;
    for (uint32_t i = 0; i < ntensors; i++) {
        const uint32_t len = r.get<uint32_t>("tensor name length");
        if (len == 0 || len > 256)
            SOF_FAIL(Io, "%s: tensor %u has a bad name length %u", path.c_str(), i, len);
        std::string name(len, '\0');
        r.read(name.data(), len, "tensor name");
        const uint32_t dtype = r.get<uint32_t>("tensor dtype");
        const uint32_t ndim = r.get<uint32_t>("tensor rank");
        if (dtype > 1 || ndim > 8)
            SOF_FAIL(Io, "%s: tensor %s has dtype %u / rank %u (expected dtype 0 or 1, rank <= 8)",
                     path.c_str(), name.c_str(), dtype, ndim);
        RefTensor t;
        size_t numel = 1;
        for (uint32_t d = 0; d < ndim; d++) {
            const int64_t dim = r.get<int64_t>("tensor dims");
            if (dim <= 0 || dim > (int64_t{1} << 32))
                SOF_FAIL(Io, "%s: tensor %s has a bad dimension %lld", path.c_str(), name.c_str(),
                         static_cast<long long>(dim));
            t.shape.push_back(dim);
            numel *= static_cast<size_t>(dim);
        }
        if (numel > r.size())
            SOF_FAIL(Io, "%s: tensor %s claims %zu elements, more than the file holds",
                     path.c_str(), name.c_str(), numel);
        if (dtype == 0) {
            t.data.resize(numel);
            r.read(t.data.data(), numel * 4, name.c_str());
            f32[name] = std::move(t);
        } else {
            std::vector<int> v(numel);
            r.read(v.data(), numel * 4, name.c_str());
            i32[name] = std::move(v);
        }
    }
    char end[8];
    r.read(end, 8, "end marker");
    if (std::memcmp(end, "SOFGPT2E", 8) != 0 || r.pos() != r.size())
        SOF_FAIL(Io, "%s: missing end marker or %zu trailing bytes after the tensors", path.c_str(),
                 r.size() - r.pos());

    auto take_f32 = [&](const std::string& name, std::vector<int64_t> shape) -> RefTensor {
        auto it = f32.find(name);
        if (it == f32.end())
            SOF_FAIL(Io, "%s: fp32 tensor '%s' is missing", path.c_str(), name.c_str());
        if (it->second.shape != shape) {
            std::string want, got;
            for (int64_t d : shape)
                want += std::to_string(d) + " ";
            for (int64_t d : it->second.shape)
                got += std::to_string(d) + " ";
            SOF_FAIL(Io, "%s: tensor '%s' has shape ( %s) but the header's config needs ( %s)",
                     path.c_str(), name.c_str(), got.c_str(), want.c_str());
        }
        return std::move(it->second);
    };
    auto take_i32 = [&](const std::string& name, size_t numel) -> std::vector<int> {
        auto it = i32.find(name);
        if (it == i32.end() || it->second.size() != numel)
            SOF_FAIL(Io, "%s: int32 tensor '%s' is missing or does not have %zu elements",
                     path.c_str(), name.c_str(), numel);
        return std::move(it->second);
    };
    const int64_t L = c.num_layers, C = c.channels, Vp = c.padded_vocab_size;
    const std::map<std::string, std::vector<int64_t>> shapes = {{"wte", {Vp, C}},
                                                                {"wpe", {c.max_seq_len, C}},
                                                                {"ln1w", {L, C}},
                                                                {"ln1b", {L, C}},
                                                                {"qkvw", {L, 3 * C, C}},
                                                                {"qkvb", {L, 3 * C}},
                                                                {"attprojw", {L, C, C}},
                                                                {"attprojb", {L, C}},
                                                                {"ln2w", {L, C}},
                                                                {"ln2b", {L, C}},
                                                                {"fcw", {L, 4 * C, C}},
                                                                {"fcb", {L, 4 * C}},
                                                                {"fcprojw", {L, C, 4 * C}},
                                                                {"fcprojb", {L, C}},
                                                                {"lnfw", {C}},
                                                                {"lnfb", {C}}};
    const size_t BT = static_cast<size_t>(ref.B) * ref.T;
    ref.inputs = take_i32("inputs", BT);
    ref.targets = take_i32("targets", BT);
    ref.logits = take_f32("logits", {ref.B, ref.T, Vp}).data;
    ref.loss = take_f32("loss", {1}).data[0];
    for (const auto& [name, shape] : shapes) {
        ref.params[name] = take_f32("param." + name, shape);
        ref.grads[name] = take_f32("grad." + name, shape);
        ref.final_params[name] = take_f32("final." + name, shape);
        ref.final_sens[name] = take_f32("sens." + name, shape);
    }
    if (ref.steps > 0) {
        ref.train_losses = take_f32("train_losses", {ref.steps}).data;
        ref.train_norms = take_f32("train_norms", {ref.steps}).data;
    }
    return ref;
}

// Copies llm.c-named tensors into superoffload's flat layout (layout.h), block tensors split per
// layer. `tensors` must hold all 16 names with llm.c shapes for layout.cfg.
inline std::vector<float> ref_to_flat(const model::ParamLayout& layout,
                                      const std::map<std::string, RefTensor>& tensors) {
    std::vector<float> flat(layout.num_params, 0.0f);
    for (const model::TensorInfo& t : layout.tensors) {
        const std::string name = model::tensor_kind_name(t.kind);
        auto it = tensors.find(name);
        if (it == tensors.end()) SOF_FAIL(Internal, "reference tensor '%s' missing", name.c_str());
        const size_t begin = t.layer >= 0 ? static_cast<size_t>(t.layer) * t.numel : 0;
        if (begin + t.numel > it->second.data.size())
            SOF_FAIL(Internal, "reference tensor '%s' is too small for layer %d", name.c_str(),
                     t.layer);
        std::memcpy(flat.data() + t.offset, it->second.data.data() + begin,
                    t.numel * sizeof(float));
    }
    return flat;
}

// The reverse of ref_to_flat: one llm.c tensor (all layers stacked) gathered from a flat buffer.
inline std::vector<float> flat_to_llmc(const model::ParamLayout& layout, const float* flat,
                                       model::TensorKind kind) {
    std::vector<float> out;
    for (const model::TensorInfo& t : layout.tensors)
        if (t.kind == kind) out.insert(out.end(), flat + t.offset, flat + t.offset + t.numel);
    return out;
}

} // namespace sof::testing
