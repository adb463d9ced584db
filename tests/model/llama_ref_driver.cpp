// Test helper (not a test) for tests/model/llama_reference.py, gptoss_reference.py and
// dropout_reference.py: imports a Hugging Face directory (or a deck's model with its tensors by
// name), runs forward (with targets) and backward of the LLaMA-family CPU model (optionally with
// training dropout keyed as the trainer keys it), writes loss/logits/grads.
// Usage: llama_ref_driver (--hf DIR | --deck FILE --params FILE) --tokens FILE --out FILE
//                         [--recompute] [--dropout SEED:STEP:BATCH0]
//   --deck: a deck whose model section is the model (any block features); --params: a
//   safetensors file of its tensors by their Hugging Face names (as hf_tensors names them)
//   --dropout: the model's attention and residual dropout rates on (config.json's, or the deck's
//   model.attention_dropout / model.residual_dropout), masks keyed by SEED, STEP and the global
//   batch row BATCH0 of row 0
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

#include "ckpt/fileio.h"
#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "config/deck.h"
#include "core/error.h"
#include "model/block_spec.h"
#include "model/model.h"
#include "model/model_config.h"
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

// Every tensor of `layout` from a safetensors file by its Hugging Face name (padding rows zero).
void read_params(const std::string& path, const model::ParamLayout& layout, float* out) {
    ckpt::SafetensorsFile f(path);
    for (const model::HfTensor& t : model::hf_tensors(layout)) {
        const ckpt::SafetensorsFile::Tensor* st = f.find(t.name);
        if (!st) SOF_FAIL(Format, "%s: tensor '%s' is missing", path.c_str(), t.name.c_str());
        if (st->shape != t.shape)
            SOF_FAIL(Format, "%s: tensor '%s' has the wrong shape", path.c_str(), t.name.c_str());
        f.read_f32(*st, 0, t.numel, out + t.offset);
    }
}

int run(int argc, char** argv) {
    std::string hf, deck, params_path, tokens_path, out, dropout;
    bool recompute = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) SOF_FAIL(Config, "%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--hf")
            hf = next();
        else if (a == "--deck")
            deck = next();
        else if (a == "--params")
            params_path = next();
        else if (a == "--dropout")
            dropout = next();
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
    if ((hf.empty() == deck.empty()) || (!deck.empty() && params_path.empty()) ||
        tokens_path.empty() || out.empty())
        SOF_FAIL(Config, "usage: llama_ref_driver (--hf DIR | --deck FILE --params FILE) --tokens "
                         "FILE --out FILE [--recompute] [--dropout SEED:STEP:BATCH0]");

    model::ArchConfig cfg;
    config::Config dcfg;
    if (!hf.empty()) {
        cfg = ckpt::read_hf_config(hf);
    } else {
        dcfg = config::parse_deck_text(ckpt::read_text(deck, "deck"), deck);
        cfg = model::config_for(dcfg.model);
        model::validate(cfg);
    }
    const model::ParamLayout layout = model::make_layout(cfg);
    std::vector<float> params(layout.num_params, 0.0f);
    if (!hf.empty())
        ckpt::import_hf(hf, layout, zero::make_shard_map(layout, 1, 0), params.data());
    else
        read_params(params_path, layout, params.data());

    int B = 0, T = 0;
    std::vector<int32_t> toks = read_tokens(tokens_path, &B, &T);
    std::vector<int> inputs(toks.begin(), toks.end() - 1), targets(toks.begin() + 1, toks.end());
    model::ModelOptions opts;
    opts.recompute = recompute;
    model::DropoutStep drop;
    if (!dropout.empty()) {
        unsigned long long seed = 0, step = 0, batch0 = 0;
        if (std::sscanf(dropout.c_str(), "%llu:%llu:%llu", &seed, &step, &batch0) != 3)
            SOF_FAIL(Config, "--dropout '%s' is not SEED:STEP:BATCH0", dropout.c_str());
        drop = {seed, static_cast<uint32_t>(step), batch0};
        opts.attn_dropout = cfg.attn_dropout;
        opts.resid_dropout = cfg.resid_dropout;
    }
    auto m = model::make_model(cfg, opts, B, T);
    if (!dropout.empty()) m->set_dropout(&drop);
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
