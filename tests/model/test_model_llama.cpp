// The LLaMA family on the CPU (llama GQA untied + llama3 RoPE scaling, qwen2 biases tied, qwen3
// qk-norm with head_dim != C/NH): finite-difference grads, recompute/threads bitwise, unit
// protocol.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/block_spec.h"
#include "model/model.h"

using namespace sof;

namespace {

model::ArchConfig small(model::Arch arch) {
    model::ArchConfig c;
    c.arch = arch;
    model::apply_arch_defaults(&c);
    c.max_seq_len = 16;
    c.vocab_size = 37;
    c.padded_vocab_size = 40;
    c.num_layers = 2;
    c.num_heads = 4;
    c.channels = 32;
    c.intermediate_size = 40;
    c.norm_eps = 1e-5f;
    c.rope_theta = 500.0;
    if (arch == model::Arch::Llama) {
        c.num_kv_heads = 2;
        c.tie_embeddings = false;
        c.rope_scaling.type = model::RopeScalingType::Llama3;
        c.rope_scaling.factor = 4.0;
        c.rope_scaling.original_max_position = 16; // some frequencies in each band
    } else if (arch == model::Arch::Qwen2) {
        c.num_kv_heads = 1;
        c.tie_embeddings = true;
    } else {
        c.num_kv_heads = 2;
        c.head_dim = 12; // NH*hd = 48 != C
        c.tie_embeddings = false;
    }
    return c;
}

std::vector<float> random_params(const model::ParamLayout& lay, float std) {
    std::vector<float> p(lay.num_params);
    model::init_params(lay, p.data(), std, 7);
    // norms and biases away from 1/0 so their grads are exercised
    unsigned s = 1;
    for (const model::TensorInfo& t : lay.tensors) {
        if (t.shape.size() != 1) continue;
        for (size_t i = 0; i < t.numel; i++) {
            s = s * 1103515245u + 12345u;
            p[t.offset + i] += 0.2f * (static_cast<float>((s >> 8) & 1023) / 1023.0f - 0.5f);
        }
    }
    return p;
}

struct Batch {
    int B = 2, T = 8;
    std::vector<int> in, tg;
    explicit Batch(int V) {
        for (int i = 0; i < B * T; i++) {
            in.push_back((i * 7 + 3) % V);
            tg.push_back((i * 11 + 5) % V);
        }
    }
};

struct Run {
    float loss = 0;
    std::vector<float> grads, logits;
};

Run run(const model::ArchConfig& cfg, const std::vector<float>& p, const Batch& b, bool recompute) {
    std::unique_ptr<model::Model> m = model::make_model(cfg, {recompute, nullptr}, b.B, b.T);
    Run r;
    r.grads.assign(m->layout().num_params, 0.0f);
    model::FlatWeights w(m->layout(), p.data());
    model::FlatGrads g(m->layout(), r.grads.data());
    for (int rep = 0; rep < 2; rep++) { // the second pass must not see stale state
        std::fill(r.grads.begin(), r.grads.end(), 0.0f);
        r.loss = m->forward(w, b.in.data(), b.tg.data(), b.B, b.T);
        r.logits = m->logits();
        m->backward(w, g, 1.0f / static_cast<float>(b.B * b.T));
    }
    return r;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const model::Arch kArchs[] = {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3};

} // namespace

TEST_CASE("LLaMA-family layouts carry the Hugging Face names and adjacency") {
    const model::ParamLayout l = model::make_layout(small(model::Arch::Llama));
    CHECK(l.tensors[0].name == "model.embed_tokens.weight");
    CHECK(l.tensors.back().name == "lm_head.weight");
    const size_t q = l.offset_of(model::TensorKind::Wq, 1),
                 k = l.offset_of(model::TensorKind::Wk, 1);
    CHECK(k == q + 32 * 32); // Wk right after Wq: one fused (Q + 2KV, C) matrix
    CHECK(l.offset_of(model::TensorKind::Wv, 1) == k + 16 * 32);
    CHECK(l.offset_of(model::TensorKind::Wup, 0) ==
          l.offset_of(model::TensorKind::Wgate, 0) + 40 * 32);
    CHECK_FALSE(l.has(model::TensorKind::Bq));
    const model::ParamLayout q3 = model::make_layout(small(model::Arch::Qwen3));
    CHECK(q3.has(model::TensorKind::QNorm));
    bool found = false;
    for (const model::TensorInfo& t : q3.tensors)
        if (t.name == "model.layers.1.self_attn.o_proj.weight") {
            found = true;
            CHECK(t.shape == std::vector<int>{32, 48});
        }
    CHECK(found);
    const model::ParamLayout q2 = model::make_layout(small(model::Arch::Qwen2));
    CHECK(q2.has(model::TensorKind::Bk));
    CHECK_FALSE(q2.has(model::TensorKind::LmHead));
    model::ArchConfig bad = small(model::Arch::Llama);
    bad.num_kv_heads = 3;
    CHECK_THROWS_WITH(model::make_layout(bad), doctest::Contains("num_kv_heads"));
}

TEST_CASE("grads match central finite differences of the loss") {
    for (model::Arch a : kArchs) {
        CAPTURE(model::arch_name(a));
        const model::ArchConfig cfg = small(a);
        const model::ParamLayout lay = model::make_layout(cfg);
        std::vector<float> p = random_params(lay, 0.15f);
        const Batch b(cfg.vocab_size);
        const Run r = run(cfg, p, b, false);
        CHECK(std::isfinite(r.loss));
        std::unique_ptr<model::Model> m = model::make_model(cfg, {}, b.B, b.T);
        auto loss_at = [&](size_t i, float v) {
            const float keep = p[i];
            p[i] = v;
            model::FlatWeights w(lay, p.data());
            const double l = m->forward(w, b.in.data(), b.tg.data(), b.B, b.T);
            p[i] = keep;
            return l;
        };
        for (const model::TensorInfo& t : lay.tensors) {
            // the element with the largest grad in this tensor
            size_t best = t.offset;
            for (size_t i = t.offset; i < t.offset + t.numel; i++)
                if (std::fabs(r.grads[i]) > std::fabs(r.grads[best])) best = i;
            const double g = r.grads[best];
            const float eps = 2e-2f;
            const double fd =
                (loss_at(best, p[best] + eps) - loss_at(best, p[best] - eps)) / (2.0 * eps);
            CAPTURE(t.name);
            CAPTURE(g);
            CAPTURE(fd);
            CHECK(std::fabs(fd - g) <= 0.03 * std::fabs(g) + 2e-4);
        }
    }
}

TEST_CASE("recompute and thread counts are bitwise invisible") {
    for (model::Arch a : kArchs) {
        CAPTURE(model::arch_name(a));
        const model::ArchConfig cfg = small(a);
        const std::vector<float> p = random_params(model::make_layout(cfg), 0.1f);
        const Batch b(cfg.vocab_size);
        const Run base = run(cfg, p, b, false);
        const Run rec = run(cfg, p, b, true);
        CHECK(base.loss == rec.loss);
        CHECK(same(base.grads, rec.grads));
        const int threads = omp_get_max_threads();
        omp_set_num_threads(threads > 1 ? 1 : 2);
        const Run other = run(cfg, p, b, false);
        omp_set_num_threads(threads);
        CHECK(base.loss == other.loss);
        CHECK(same(base.logits, other.logits));
        CHECK(same(base.grads, other.grads));
    }
}

namespace {
struct Recorder : model::WeightSource, model::GradSink {
    const model::ParamLayout& lay;
    const float* p;
    float* g;
    std::vector<std::string> events;
    Recorder(const model::ParamLayout& l, const float* params, float* grads)
        : lay(l), p(params), g(grads) {}
    const float* acquire(int u, model::Pass pass) override {
        add(pass == model::Pass::Forward ? 'f' : 'b', 'a', u);
        return p + lay.unit_begin[static_cast<size_t>(u)];
    }
    void release(int u, model::Pass) override { add('r', 0, u); }
    float* grads(int u) override { return g + lay.unit_begin[static_cast<size_t>(u)]; }
    void unit_done(int u) override { add('d', 0, u); }
    void add(char a, char b, int u) {
        char buf[16];
        if (b)
            std::snprintf(buf, sizeof buf, "%c%c%d", a, b, u);
        else
            std::snprintf(buf, sizeof buf, "%c%d", a, u);
        events.emplace_back(buf);
    }
};
} // namespace

TEST_CASE("unit protocol: untied heads never fetch the embedding in backward") {
    for (model::Arch a : {model::Arch::Llama, model::Arch::Qwen2}) {
        const model::ArchConfig cfg = small(a);
        const model::ParamLayout lay = model::make_layout(cfg);
        const std::vector<float> p = random_params(lay, 0.1f);
        std::vector<float> g(lay.num_params, 0.0f);
        const Batch b(cfg.vocab_size);
        std::unique_ptr<model::Model> m = model::make_model(cfg, {}, b.B, b.T);
        Recorder rec(lay, p.data(), g.data());
        m->forward(rec, b.in.data(), b.tg.data(), b.B, b.T);
        m->backward(rec, rec, 0.1f);
        std::string s;
        for (const std::string& e : rec.events)
            s += e + " ";
        if (cfg.tie_embeddings)
            CHECK(s == "fa0 fa1 r1 fa2 r2 fa3 r3 r0 ba0 ba3 r3 d3 ba2 r2 d2 ba1 r1 d1 r0 d0 ");
        else
            CHECK(s == "fa0 r0 fa1 r1 fa2 r2 fa3 r3 ba3 r3 d3 ba2 r2 d2 ba1 r1 d1 d0 ");
    }
}
