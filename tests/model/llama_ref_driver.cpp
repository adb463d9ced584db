// Test helper (not a test) for tests/model/llama_reference.py: imports a Hugging Face directory,
// runs forward (with targets) and backward of the LLaMA-family CPU model, writes loss/logits/grads.
// Usage: llama_ref_driver --hf DIR --tokens FILE --out FILE [--recompute]
//   --tokens: int32 little-endian B, T, then B*T+1 tokens (inputs = first B*T, targets shifted by
//   1)
//   --out: a safetensors file (F32): "logits" (B, T, V), "grad:<tensor name>" for every tensor in
//          layout order; __metadata__ holds "loss", "B", "T", "V", "num_params" and "order" (the
//          tensor names in layout order, joined with ',').
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "core/error.h"
#include "model/model.h"
#include "zero/shard.h"

using namespace sof;

namespace {

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

    model::ArchConfig cfg = ckpt::read_hf_config(hf);
    const model::ParamLayout layout = model::make_layout(cfg);
    std::vector<float> params(layout.num_params);
    ckpt::import_hf(hf, layout, zero::make_shard_map(layout, 1, 0), params.data());

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
    const std::vector<float> lg = m->logits();
    const float* lp = lg.data();
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
