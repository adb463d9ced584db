// Decoding with a KV cache (Model::decode) against the full forward: every architecture's logits
// of a prompt run in chunks and then token by token equal the rows of one causal forward over
// the whole sequence; re-running a suffix; the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"

using namespace sof;

namespace {

model::ArchConfig small(model::Arch arch) {
    model::ArchConfig c;
    c.arch = arch;
    model::apply_arch_defaults(&c);
    c.max_seq_len = 24;
    c.vocab_size = 37;
    c.padded_vocab_size = 40;
    c.num_layers = 2;
    c.num_heads = 4;
    c.channels = 32;
    c.intermediate_size = arch == model::Arch::Gpt2 ? 0 : 40;
    c.rope_theta = 500.0;
    if (arch == model::Arch::Llama) {
        c.num_kv_heads = 2;
        c.tie_embeddings = false;
        c.rope_scaling.type = model::RopeScalingType::Llama3;
        c.rope_scaling.factor = 4.0;
        c.rope_scaling.original_max_position = 16;
    } else if (arch == model::Arch::Qwen3) {
        c.num_kv_heads = 2;
        c.head_dim = 12;
        c.tie_embeddings = false;
    }
    return c;
}

// max |a - b| / max |b| over rows [r, r + n) of (rows, Vp) logits, the first V columns
double row_err(const std::vector<float>& a, size_t a_row, const std::vector<float>& b, size_t b_row,
               int n, int V, int Vp) {
    double e = 0, m = 0;
    for (int i = 0; i < n; i++)
        for (int v = 0; v < V; v++) {
            const double x = a[(a_row + i) * Vp + v], y = b[(b_row + i) * Vp + v];
            e = std::max(e, std::fabs(x - y));
            m = std::max(m, std::fabs(y));
        }
    return e / std::max(m, 1e-30);
}

} // namespace

TEST_CASE("decode with a KV cache equals the full forward, every architecture") {
    for (model::Arch a :
         {model::Arch::Gpt2, model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3}) {
        const model::ArchConfig cfg = small(a);
        CAPTURE(model::arch_name(a));
        const model::ParamLayout lay = model::make_layout(cfg);
        std::vector<float> p(lay.num_params);
        model::init_params(lay, p.data(), 0.2f, 11);
        model::FlatWeights w(lay, p.data());
        const int n = 20, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
        std::vector<int> toks(n);
        for (int i = 0; i < n; i++)
            toks[static_cast<size_t>(i)] = (i * 7 + 3) % V;
        // max_B = 2: the cache uses one sequence's rows of bigger buffers
        const auto m = model::make_model(cfg, {}, 2, cfg.max_seq_len);
        m->forward(w, toks.data(), nullptr, 1, n);
        const std::vector<float> full = m->logits();

        // a prompt of 6 in one call, a chunk of 3, then one token at a time
        m->decode(w, toks.data(), 6, 0);
        double worst = row_err(m->logits(), 0, full, 0, 6, V, Vp);
        m->decode(w, toks.data() + 6, 3, 6);
        worst = std::max(worst, row_err(m->logits(), 0, full, 6, 3, V, Vp));
        for (int t = 9; t < n; t++) {
            m->decode(w, toks.data() + t, 1, t);
            CHECK(m->logits().size() == static_cast<size_t>(Vp));
            worst =
                std::max(worst, row_err(m->logits(), 0, full, static_cast<size_t>(t), 1, V, Vp));
        }
        // going back re-runs a suffix over the cache of the positions before it
        m->decode(w, toks.data() + 12, 4, 12);
        worst = std::max(worst, row_err(m->logits(), 0, full, 12, 4, V, Vp));
        MESSAGE(std::string(model::arch_name(a)), ": worst rel logit diff ", worst);
        CHECK(worst < 1e-5);

        // another token at a cached position changes the logits (the test can tell)
        std::vector<int> other = toks;
        other[3] = (other[3] + 1) % V;
        m->decode(w, other.data(), 4, 0);
        m->decode(w, toks.data() + 4, 1, 4);
        CHECK(row_err(m->logits(), 0, full, 4, 1, V, Vp) > 1e-3);

        // errors: a gap in the cache, past the buffers, after a forward
        CHECK_THROWS_AS(m->decode(w, toks.data(), 1, 6), core::Error);
        CHECK_THROWS_AS(m->decode(w, toks.data(), 2, cfg.max_seq_len - 1), core::Error);
        m->forward(w, toks.data(), nullptr, 1, 4);
        CHECK_THROWS_AS(m->decode(w, toks.data(), 1, 2), core::Error);
    }
}

TEST_CASE("decode is refused with recompute") {
    const model::ArchConfig cfg = small(model::Arch::Llama);
    const model::ParamLayout lay = model::make_layout(cfg);
    std::vector<float> p(lay.num_params, 0.01f);
    model::FlatWeights w(lay, p.data());
    model::ModelOptions o;
    o.recompute = true;
    const auto m = model::make_model(cfg, o, 1, 8);
    const int t = 1;
    try {
        m->decode(w, &t, 1, 0);
        FAIL("no error");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("recompute") != std::string::npos);
    }
}
