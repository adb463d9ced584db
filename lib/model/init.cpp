// Parameter initialisation of every architecture (the block description's rules, seeded, no global
// state) and the FLOPs model.
// Each tensor draws from its own mt19937_64 stream seeded by splitmix64(seed, tensor index).
#include <cmath>
#include <cstdint>
#include <random>

#include "core/error.h"
#include "model/block_spec.h"
#include "model/model.h"

namespace sof::model {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Fills out[0..n) with N(0, std) by Box-Muller over a seeded mt19937_64 (fully specified by the
// C++ standard, so the values are the same on every platform and compiler).
void fill_normal(float* out, size_t n, double std, uint64_t seed) {
    std::mt19937_64 gen(seed);
    const double two_pi = 6.283185307179586;
    auto uniform = [&gen]() { // (0, 1]
        return (static_cast<double>(gen() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    };
    for (size_t i = 0; i < n; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        const double a = two_pi * uniform();
        out[i] = static_cast<float>(std * r * std::cos(a));
        if (i + 1 < n) out[i + 1] = static_cast<float>(std * r * std::sin(a));
    }
}

} // namespace

void init_params(const ParamLayout& layout, float* params, float std, unsigned long long seed) {
    if (!(std > 0.0f) || !std::isfinite(std))
        SOF_FAIL(Config, "model.init_std = %g must be a positive finite number", std);
    const ArchConfig& cfg = layout.cfg;
    const double resid_std = std / std::sqrt(2.0 * cfg.num_layers);
    const long nt = static_cast<long>(layout.tensors.size());
#pragma omp parallel for schedule(dynamic)
    for (long i = 0; i < nt; i++) {
        const TensorInfo& t = layout.tensors[static_cast<size_t>(i)];
        float* p = params + t.offset;
        const uint64_t s = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(i));
        switch (t.init) { // the block description's rule for the tensor (block_spec.h)
        case Init::One:
            for (size_t j = 0; j < t.numel; j++)
                p[j] = 1.0f;
            break;
        case Init::Zero:
            for (size_t j = 0; j < t.numel; j++)
                p[j] = 0.0f;
            break;
        case Init::Embedding: { // padded rows V..Vp-1 stay zero (as in llm.c checkpoints)
            const size_t real = static_cast<size_t>(cfg.vocab_size) * cfg.channels;
            fill_normal(p, real, std, s);
            for (size_t j = real; j < t.numel; j++)
                p[j] = 0.0f;
            break;
        }
        case Init::Residual:
            fill_normal(p, t.numel, resid_std, s);
            break;
        case Init::Normal:
            fill_normal(p, t.numel, std, s);
            break;
        }
    }
}

BlockParams block_params(const ArchConfig& cfg) {
    const ParamLayout lay = make_layout(cfg);
    const BlockSpec spec = block_spec(cfg);
    BlockParams b;
    b.total =
        static_cast<double>(lay.unit_begin[static_cast<size_t>(spec.L) + 1] - lay.unit_begin[1]);
    b.active = b.total;
    for (int l = 0; l < spec.L; l++)
        if (spec.is_sparse(l))
            b.active -= static_cast<double>(spec.E - spec.K) * 3.0 * spec.IE * spec.C;
    return b;
}

double flops_per_token(const ArchConfig& cfg, int T) {
    const ParamLayout lay = make_layout(cfg);
    const BlockSpec spec = block_spec(cfg);
    // every parameter but the position table takes part in a matmul (wte twice: lookup is free,
    // the LM head is a matmul): 2 FLOPs forward + 4 backward per weight and token
    // (LLaMA: the embedding lookup is free; the LM head is wte when tied, lm_head otherwise);
    // vectors (biases, norms, sinks) are counted too, as nanoGPT's 6N does
    double n = static_cast<double>(lay.num_params);
    if (!cfg.llama_family())
        n -= static_cast<double>(cfg.max_seq_len) * cfg.channels;
    else if (!cfg.tie_embeddings)
        n -= static_cast<double>(cfg.padded_vocab_size) * cfg.channels;
    // a sparse block computes with K of its E experts per token (the router counts whole): the
    // active parameters, while memory and the optimizer count all of them (num_params)
    const BlockParams b = block_params(cfg);
    n -= b.total - b.active;
    // attention scores and the weighted sum of values: 2 matmuls of 2*keys*(NH*hd) per token and
    // layer in forward, twice that in backward, over the keys a query attends to counted as the
    // full square (PaLM's MFU): T, or the window
    double attn = 0.0;
    for (int l = 0; l < spec.L; l++)
        attn += 12.0 * attention_keys(T, spec.window[static_cast<size_t>(l)]) * cfg.q_dim();
    return 6.0 * n + attn;
}

} // namespace sof::model
