// Test helper (not a test) for tests/model/llama_reference.py: imports a Hugging Face directory,
// runs forward (with targets) and backward of the LLaMA-family CPU model, writes loss/logits/grads.
// Usage: llama_ref_driver --hf DIR --tokens FILE --out FILE [--recompute]
//   --tokens: int32 little-endian B, T, then B*T+1 tokens (inputs = first B*T, targets shifted by
//   1)
//   --out: a safetensors file (F32): "logits" (B, T, V), "grad:<tensor name>" for every tensor in
//          layout order; __metadata__ holds "loss", "B", "T", "V", "num_params" and "order" (the
//          tensor names in layout order, joined with ',').
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "model/model.h"
#include "model/shard.h"

#if __has_include("ckpt/hf.h")
#include "ckpt/hf.h"
#define SOF_REF_HAVE_HF_IMPORT 1
#endif

using namespace sof;

namespace {

#ifndef SOF_REF_HAVE_HF_IMPORT
// Stand-in until ckpt/hf.h lands: config.json -> ArchConfig and a plain reader of (sharded)
// safetensors with F32/BF16 tensors, by the layout's tensor names. Full-buffer reads only.
namespace hfl {

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    if (!f) SOF_FAIL(Io, "cannot open %s", path.c_str());
    return nlohmann::json::parse(f);
}

model::ArchConfig read_hf_config(const std::string& dir) {
    nlohmann::json j = read_json(dir + "/config.json");
    model::ArchConfig c;
    if (!model::parse_arch(j.at("model_type").get<std::string>(), &c.arch))
        SOF_FAIL(Config, "%s/config.json: unsupported model_type", dir.c_str());
    c.channels = j.at("hidden_size").get<int>();
    c.intermediate_size = j.at("intermediate_size").get<int>();
    c.num_heads = j.at("num_attention_heads").get<int>();
    c.num_kv_heads = j.value("num_key_value_heads", c.num_heads);
    c.head_dim = j.contains("head_dim") ? j.at("head_dim").get<int>() : 0;
    c.num_layers = j.at("num_hidden_layers").get<int>();
    c.norm_eps = j.at("rms_norm_eps").get<float>();
    c.rope_theta = j.at("rope_theta").get<double>();
    c.vocab_size = c.padded_vocab_size = j.at("vocab_size").get<int>();
    c.max_seq_len = j.at("max_position_embeddings").get<int>();
    model::apply_arch_defaults(&c);
    c.tie_embeddings = j.value("tie_word_embeddings", false);
    if (c.arch == model::Arch::Llama) c.qkv_bias = j.value("attention_bias", false);
    if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) {
        const nlohmann::json& r = j.at("rope_scaling");
        c.rope_scaling.type = model::RopeScalingType::Llama3;
        c.rope_scaling.factor = r.at("factor").get<double>();
        c.rope_scaling.low_freq_factor = r.at("low_freq_factor").get<double>();
        c.rope_scaling.high_freq_factor = r.at("high_freq_factor").get<double>();
        c.rope_scaling.original_max_position = r.at("original_max_position_embeddings").get<int>();
    }
    return c;
}

void read_file_tensors(const std::string& path, const model::ParamLayout& layout, float* out,
                       size_t* found) {
    std::ifstream f(path, std::ios::binary);
    if (!f) SOF_FAIL(Io, "cannot open %s", path.c_str());
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string hs(n, '\0');
    f.read(hs.data(), static_cast<std::streamsize>(n));
    nlohmann::json h = nlohmann::json::parse(hs);
    for (const model::TensorInfo& t : layout.tensors) {
        if (!h.contains(t.name)) continue;
        const nlohmann::json& e = h.at(t.name);
        const std::string dt = e.at("dtype").get<std::string>();
        const size_t a = e.at("data_offsets")[0].get<size_t>();
        const size_t b = e.at("data_offsets")[1].get<size_t>();
        const size_t es = dt == "F32" ? 4 : 2;
        if (b - a != es * t.numel)
            SOF_FAIL(Format, "%s: %s has the wrong size", path.c_str(), t.name.c_str());
        std::vector<char> buf(b - a);
        f.seekg(static_cast<std::streamoff>(8 + n + a));
        f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        if (dt == "F32") {
            std::memcpy(out + t.offset, buf.data(), buf.size());
        } else {
            for (size_t i = 0; i < t.numel; i++) {
                uint16_t u;
                std::memcpy(&u, buf.data() + 2 * i, 2);
                out[t.offset + i] = core::bf16_to_f32(u);
            }
        }
        (*found)++;
    }
}

void import_hf(const std::string& dir, const model::ParamLayout& layout, const model::ShardMap&,
               float* out) {
    size_t found = 0;
    std::ifstream idx(dir + "/model.safetensors.index.json");
    if (idx) {
        nlohmann::json j = read_json(dir + "/model.safetensors.index.json");
        std::vector<std::string> files;
        for (auto& [k, v] : j.at("weight_map").items())
            if (std::find(files.begin(), files.end(), v.get<std::string>()) == files.end())
                files.push_back(v.get<std::string>());
        for (const std::string& fn : files)
            read_file_tensors(dir + "/" + fn, layout, out, &found);
    } else {
        read_file_tensors(dir + "/model.safetensors", layout, out, &found);
    }
    if (found != layout.tensors.size())
        SOF_FAIL(Format, "%s: found %zu of %zu tensors", dir.c_str(), found, layout.tensors.size());
}

} // namespace hfl
using hfl::import_hf;
using hfl::read_hf_config;
#else
using ckpt::import_hf;
using ckpt::read_hf_config;
#endif

std::vector<int32_t> read_tokens(const std::string& path, int* B, int* T) {
    std::ifstream f(path, std::ios::binary);
    if (!f) SOF_FAIL(Io, "cannot open token file %s", path.c_str());
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() < 8 || bytes.size() % 4 != 0)
        SOF_FAIL(Format, "token file %s: %zu bytes is not int32 B, T, tokens", path.c_str(),
                 bytes.size());
    std::vector<int32_t> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    *B = v[0], *T = v[1];
    const size_t n = static_cast<size_t>(*B) * static_cast<size_t>(*T) + 1;
    if (*B <= 0 || *T <= 0 || v.size() != n + 2)
        SOF_FAIL(Format, "token file %s: B = %d, T = %d need %zu tokens, found %zu", path.c_str(),
                 *B, *T, n, v.size() - 2);
    return std::vector<int32_t>(v.begin() + 2, v.end());
}

struct OutTensor {
    std::string name;
    std::vector<int> shape;
    const float* data;
    size_t numel;
};

// A minimal safetensors writer (F32 only): 8-byte header length, JSON header, raw data.
void write_safetensors(const std::string& path, const std::vector<OutTensor>& ts,
                       const nlohmann::json& meta) {
    nlohmann::json h = nlohmann::json::object();
    size_t off = 0;
    for (const OutTensor& t : ts) {
        h[t.name] = {
            {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + 4 * t.numel}}};
        off += 4 * t.numel;
    }
    h["__metadata__"] = meta;
    std::string hs = h.dump();
    while (hs.size() % 8 != 0)
        hs += ' ';
    std::ofstream f(path, std::ios::binary);
    if (!f) SOF_FAIL(Io, "cannot write %s", path.c_str());
    const uint64_t n = hs.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    for (const OutTensor& t : ts)
        f.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(4 * t.numel));
    if (!f) SOF_FAIL(Io, "writing %s failed", path.c_str());
}

int run(int argc, char** argv) {
    std::string hf, tokens_path, out;
    bool recompute = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) SOF_FAIL(Config, "%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--hf")
            hf = next();
        else if (a == "--tokens")
            tokens_path = next();
        else if (a == "--out")
            out = next();
        else if (a == "--recompute")
            recompute = true;
        else
            SOF_FAIL(Config,
                     "unknown option '%s' (usage: --hf DIR --tokens FILE --out FILE "
                     "[--recompute])",
                     a.c_str());
    }
    if (hf.empty() || tokens_path.empty() || out.empty())
        SOF_FAIL(Config, "usage: llama_ref_driver --hf DIR --tokens FILE --out FILE [--recompute]");

    model::ArchConfig cfg = read_hf_config(hf);
    const model::ParamLayout layout = model::make_layout(cfg);
    std::vector<float> params(layout.num_params);
    import_hf(hf, layout, model::make_shard_map(layout, 1, 0), params.data());

    int B = 0, T = 0;
    std::vector<int32_t> toks = read_tokens(tokens_path, &B, &T);
    std::vector<int> inputs(toks.begin(), toks.end() - 1), targets(toks.begin() + 1, toks.end());
    model::ModelOptions opts;
    opts.recompute = recompute;
    auto m = model::make_model(cfg, opts, B, T);
    model::FlatWeights w(layout, params.data());
    const float loss = m->forward(w, inputs.data(), targets.data(), B, T);
    // the first V logits, copied before backward (which may reuse the buffer)
    const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    std::vector<float> logits(static_cast<size_t>(B) * T * V);
    const float* lp = m->logits();
    for (size_t r = 0; r < static_cast<size_t>(B) * T; r++)
        for (int v = 0; v < V; v++)
            logits[r * V + static_cast<size_t>(v)] = lp[r * Vp + static_cast<size_t>(v)];
    std::vector<float> grads(layout.num_params, 0.0f);
    model::FlatGrads g(layout, grads.data());
    m->backward(w, g, 1.0f / (static_cast<float>(B) * T));

    std::vector<OutTensor> ts;
    ts.push_back({"logits", {B, T, V}, logits.data(), logits.size()});
    std::string order;
    for (const model::TensorInfo& t : layout.tensors) {
        ts.push_back({"grad:" + t.name, t.shape, grads.data() + t.offset, t.numel});
        order += (order.empty() ? "" : ",") + t.name;
    }
    char lbuf[64];
    std::snprintf(lbuf, sizeof lbuf, "%.9g", static_cast<double>(loss));
    nlohmann::json meta = {{"loss", lbuf},
                           {"B", std::to_string(B)},
                           {"T", std::to_string(T)},
                           {"V", std::to_string(V)},
                           {"num_params", std::to_string(layout.num_params)},
                           {"order", order}};
    write_safetensors(out, ts, meta);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_ref_driver: %s\n", e.what());
        return 1;
    }
}
