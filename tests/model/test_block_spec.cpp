// The block described once (block_spec.h): every architecture's tensor table, its Hugging Face
// map (fused phi3 tensors), weight decay as transformers' Trainer groups it, unit offsets, the
// per-layer window and the attention work it implies; the older layouts unchanged.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "core/strfmt.h"
#include "model/block_spec.h"
#include "model/model.h"
#include "model/transformer.h"

using namespace sof;
using model::Arch;
using model::ArchConfig;
using model::TensorKind;

namespace {

ArchConfig small(Arch a) {
    ArchConfig c;
    c.arch = a;
    model::apply_arch_defaults(&c);
    c.max_seq_len = 64;
    c.vocab_size = 50;
    c.padded_vocab_size = 64;
    c.num_layers = 3;
    c.num_heads = 4;
    c.num_kv_heads = c.llama_family() ? 2 : 0;
    c.channels = 32;
    c.intermediate_size = 48;
    c.tie_embeddings = false;
    return c;
}

const Arch kAll[] = {Arch::Gpt2, Arch::Llama,   Arch::Qwen2,  Arch::Qwen3,
                     Arch::Phi3, Arch::Mistral, Arch::SeedOss};

// transformers' Trainer.get_decay_parameter_names: no decay for names matching these patterns
// (and LayerNorm modules); written from its source independently of block_spec.cpp
bool trainer_decays(const std::string& name) {
    // the patterns bias|layernorm|rmsnorm|(^|\.)norm($|\.)|_norm($|\.) without std::regex (GCC 12
    // warns maybe-uninitialized inside <regex> under ASan at -O2, and -Werror stops the build)
    std::string lower = name;
    for (char& ch : lower)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.find("bias") != std::string::npos || lower.find("layernorm") != std::string::npos ||
        lower.find("rmsnorm") != std::string::npos)
        return false;
    size_t begin = 0;
    while (begin <= lower.size()) { // each dotted component: "norm", or ending in "_norm"
        size_t end = lower.find('.', begin);
        if (end == std::string::npos) end = lower.size();
        const std::string part = lower.substr(begin, end - begin);
        if (part == "norm" || (part.size() >= 5 && part.compare(part.size() - 5, 5, "_norm") == 0))
            return false;
        begin = end + 1;
    }
    return true;
}

// n token ids (a * i + b) % vocab: deterministic inputs and targets for the block tests
std::vector<int> ids(int n, int a, int b, int vocab) {
    std::vector<int> v(static_cast<size_t>(n));
    for (int i = 0; i < n; i++)
        v[static_cast<size_t>(i)] = (a * i + b) % vocab;
    return v;
}

} // namespace

TEST_CASE("the LLaMA family's layouts are the ones checkpoints and ZeRO-3 shards were written in") {
    // the order and names of the tables before the block was described once (layout.cpp of
    // issue 25): q, k, v adjacent, then their biases, then qk-norm, o, post norm, gate, up, down
    for (Arch a : {Arch::Llama, Arch::Qwen2, Arch::Qwen3}) {
        CAPTURE(model::arch_name(a));
        ArchConfig c = small(a);
        if (a == Arch::Qwen3) c.head_dim = 12;
        const model::ParamLayout l = model::make_layout(c);
        std::vector<std::string> want = {"input_layernorm.weight", "self_attn.q_proj.weight",
                                         "self_attn.k_proj.weight", "self_attn.v_proj.weight"};
        if (a == Arch::Qwen2)
            for (const char* b : {"q", "k", "v"})
                want.push_back(core::strfmt("self_attn.%s_proj.bias", b));
        if (a == Arch::Qwen3) {
            want.push_back("self_attn.q_norm.weight");
            want.push_back("self_attn.k_norm.weight");
        }
        for (const char* n : {"self_attn.o_proj.weight", "post_attention_layernorm.weight",
                              "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
            want.push_back(n);
        REQUIRE(l.tensors.size() == 1 + 3 * want.size() + 2);
        CHECK(l.tensors[0].name == "model.embed_tokens.weight");
        for (int layer = 0; layer < 3; layer++)
            for (size_t i = 0; i < want.size(); i++)
                CHECK(l.tensors[1 + layer * want.size() + i].name ==
                      core::strfmt("model.layers.%d.", layer) + want[i]);
        CHECK(l.tensors[l.tensors.size() - 2].name == "model.norm.weight");
        CHECK(l.tensors.back().name == "lm_head.weight");
    }
}

TEST_CASE("every architecture: layout, offsets, decay and init follow the description") {
    for (Arch a : kAll) {
        for (int features = 0; features < 2; features++) {
            ArchConfig c = small(a);
            if (features && c.llama_family()) { // every optional block feature on at once
                c.qkv_bias = c.o_bias = c.mlp_bias = c.attn_sinks = true;
                c.head_dim = 12;
                c.sliding_window = 5;
                c.layer_types = "sliding,full";
            }
            CAPTURE(model::arch_name(a));
            CAPTURE(features);
            const model::BlockSpec s = model::block_spec(c);
            const model::ParamLayout l = model::make_layout(c);
            CHECK(static_cast<double>(l.num_params) == model::param_count(c));
            // the layout's tensors are the description's slots, unit by unit
            CHECK(l.tensors.size() == s.embed.size() +
                                          static_cast<size_t>(c.num_layers) * s.block.size() +
                                          s.head.size());
            const model::UnitOffsets o = model::unit_offsets(s);
            const size_t u1 = l.unit_begin[1],
                         uf = l.unit_begin[static_cast<size_t>(c.num_layers) + 1];
            CHECK(o.wte == l.offset_of(TensorKind::Wte, -1));
            CHECK(o.ln1w == l.offset_of(TensorKind::Ln1w, 0) - u1);
            CHECK(o.wo == l.offset_of(TensorKind::Attprojw, 0) - u1);
            CHECK(o.lnfw == l.offset_of(TensorKind::Lnfw, -1) - uf);
            if (c.llama_family()) {
                CHECK(o.wqkv == l.offset_of(TensorKind::Wq, 0) - u1);
                CHECK(o.wfc == l.offset_of(TensorKind::Wgate, 0) - u1);
                CHECK(o.wproj == l.offset_of(TensorKind::Wdown, 0) - u1);
                CHECK(o.head == l.offset_of(TensorKind::LmHead, -1) - uf);
                CHECK((o.sinks != model::kNoTensor) == (features == 1));
                if (features) {
                    CHECK(o.sinks == l.offset_of(TensorKind::Sinks, 0) - u1);
                    CHECK(o.bo == l.offset_of(TensorKind::Attprojb, 0) - u1);
                    CHECK(o.bfc == l.offset_of(TensorKind::Bgate, 0) - u1);
                    CHECK(o.bproj == l.offset_of(TensorKind::Bdown, 0) - u1);
                    CHECK(s.window == std::vector<int>{5, 0, 5});
                }
                // the HF names are unique, and decay is exactly what transformers' Trainer does
                for (const model::TensorInfo& t : l.tensors) {
                    CAPTURE(t.name);
                    CHECK(t.decay == trainer_decays(t.name));
                }
            } else {
                CHECK(o.wqkv == l.offset_of(TensorKind::Qkvw, 0) - u1);
                CHECK(s.window == std::vector<int>{0, 0, 0});
            }
            // init: norms 1, biases 0, matrices random
            std::vector<float> p(l.num_params);
            model::init_params(l, p.data(), 0.02f, 5);
            for (const model::TensorInfo& t : l.tensors) {
                CAPTURE(t.name);
                const float* x = p.data() + t.offset;
                if (t.init == model::Init::One) CHECK(x[t.numel - 1] == 1.0f);
                if (t.init == model::Init::Zero) CHECK(x[t.numel - 1] == 0.0f);
                if (t.init == model::Init::Normal || t.init == model::Init::Residual)
                    CHECK(x[0] != 0.0f);
            }
        }
    }
}

TEST_CASE("Hugging Face map: one tensor per name, phi3's fused qkv_proj and gate_up_proj") {
    for (Arch a : {Arch::Llama, Arch::Phi3}) {
        ArchConfig c = small(a);
        const model::ParamLayout l = model::make_layout(c);
        const std::vector<model::HfTensor> h = model::hf_tensors(l);
        const int Q = c.q_dim(), KV = c.kv_dim(), C = c.channels, I = c.ffn_dim();
        size_t covered = 0;
        for (const model::HfTensor& t : h) {
            size_t n = 1;
            for (int64_t d : t.shape)
                n *= static_cast<size_t>(d);
            CHECK(n == t.numel);
            covered += t.flat_numel;
        }
        CHECK(covered == l.num_params);                                  // every element once
        CHECK(h.front().shape == std::vector<int64_t>{c.vocab_size, C}); // no padding rows
        auto find = [&](const std::string& name) -> const model::HfTensor* {
            for (const model::HfTensor& t : h)
                if (t.name == name) return &t;
            return nullptr;
        };
        if (a == Arch::Llama) {
            CHECK(h.size() == l.tensors.size());
            CHECK(find("model.layers.1.self_attn.qkv_proj.weight") == nullptr);
            continue;
        }
        // rows q | k | v and gate | up, in flat order: the layout's q, k, v and gate, up
        const model::HfTensor* qkv = find("model.layers.1.self_attn.qkv_proj.weight");
        const model::HfTensor* gu = find("model.layers.1.mlp.gate_up_proj.weight");
        REQUIRE(qkv);
        REQUIRE(gu);
        CHECK(qkv->shape == std::vector<int64_t>{Q + 2 * KV, C});
        CHECK(qkv->offset == l.offset_of(TensorKind::Wq, 1));
        CHECK(qkv->count == 3);
        CHECK(gu->shape == std::vector<int64_t>{2 * I, C});
        CHECK(gu->offset == l.offset_of(TensorKind::Wgate, 1));
        CHECK(find("model.layers.1.self_attn.q_proj.weight") == nullptr);
        CHECK(h.size() == l.tensors.size() - 3 * 3); // 3 layers x (3 -> 1 and 2 -> 1)
    }
}

TEST_CASE("sliding window: attention pairs and FLOPs follow each layer's window") {
    // against a brute-force count of the causal band
    for (int T : {1, 7, 64})
        for (int w : {0, 1, 5, 64, 100}) {
            double n = 0;
            for (int t = 0; t < T; t++)
                for (int k = 0; k <= t; k++)
                    n += (w == 0 || t - k < w) ? 1 : 0;
            CHECK(model::attention_pairs(T, w) == n);
        }
    ArchConfig c = small(Arch::Mistral);
    const double full = model::flops_per_token(c, 64);
    c.sliding_window = 16;
    const double all = model::flops_per_token(c, 64);
    c.layer_types = "full,sliding,sliding";
    const double two = model::flops_per_token(c, 64);
    const double per_layer = 12.0 * (64 - 16) * c.q_dim(); // keys saved per layer and token
    CHECK(full - all == doctest::Approx(3 * per_layer));
    CHECK(full - two == doctest::Approx(2 * per_layer));
    c.layer_types = "sliding,nope";
    CHECK_THROWS_WITH_AS(model::validate(c), doctest::Contains("model.layer_types"), core::Error);
}

TEST_CASE("dropout: the masks do not depend on MLP tiles or recompute; keyed by step and row") {
    // a seed_oss block (q/k/v biases, head_dim != C/NH) with both dropouts; B*T = 30 rows in MLP
    // tiles of 7 (tiles cross sequence boundaries: the residual mask is split per sequence)
    ArchConfig c = small(Arch::SeedOss);
    c.qkv_bias = true;
    c.head_dim = 12;
    c.sliding_window = 6;
    const model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params);
    model::init_params(l, p.data(), 0.2f, 3);
    const int B = 3, T = 10;
    const std::vector<int> in = ids(B * T, 7, 3, c.vocab_size), tg = ids(B * T, 5, 1, c.vocab_size);
    struct Out {
        float loss;
        std::vector<float> g;
    };
    auto run = [&](int tile, bool recompute, const model::DropoutStep* d) {
        model::ModelOptions o;
        o.attn_dropout = 0.15f;
        o.resid_dropout = 0.25f;
        o.mlp_tile = tile;
        o.recompute = recompute;
        model::Transformer m(c, o, B, T);
        m.set_dropout(d);
        model::FlatWeights w(l, p.data());
        Out r{m.forward(w, in.data(), tg.data(), B, T), std::vector<float>(l.num_params, 0.0f)};
        model::FlatGrads g(l, r.g.data());
        m.backward(w, g, 1.0f / (B * T));
        return r;
    };
    const model::DropoutStep d{11, 4, 6};
    const Out base = run(0, false, &d);
    const Out tiled = run(7, false, &d);
    const Out rec = run(0, true, &d);
    CHECK(rec.loss == base.loss);
    CHECK(rec.g == base.g); // recompute draws the same masks: bitwise
    CHECK(tiled.loss == doctest::Approx(base.loss).epsilon(1e-6));
    double worst = 0, big = 0;
    for (size_t i = 0; i < base.g.size(); i++) {
        worst = std::max(worst, static_cast<double>(std::fabs(tiled.g[i] - base.g[i])));
        big = std::max(big, static_cast<double>(std::fabs(base.g[i])));
    }
    CHECK(worst <= 1e-5 * big);
    // dropout is on and keyed: off, another step, another first row each change the loss
    const model::DropoutStep step5{11, 5, 6}, row7{11, 4, 7};
    const float off = run(0, false, nullptr).loss;
    for (float other : {off, run(0, false, &step5).loss, run(0, false, &row7).loss})
        CHECK(std::fabs(other - base.loss) > 1e-4 * base.loss);
}

TEST_CASE("mixture-of-experts blocks: qwen3_moe, mixtral and gpt_oss tensors, decay and HF map") {
    for (Arch a : {Arch::Qwen3Moe, Arch::Mixtral, Arch::GptOss}) {
        CAPTURE(model::arch_name(a));
        ArchConfig c = small(a);
        c.num_experts = 4;
        c.experts_per_tok = 2;
        c.moe_intermediate_size = a == Arch::Qwen3Moe ? 16 : c.intermediate_size;
        c.norm_topk_prob = true;
        if (a == Arch::Qwen3Moe) c.mlp_only_layers = {0};
        const model::BlockSpec s = model::block_spec(c);
        const model::ParamLayout l = model::make_layout(c);
        CHECK(static_cast<double>(l.num_params) == model::param_count(c));
        const bool go = a == Arch::GptOss;
        CHECK(s.moe_bias == go);
        CHECK(s.topk_softmax == go);
        CHECK(s.moe_clamp == go);
        CHECK(s.sinks == go);
        // the sparse block: the dense attention part, router (+ bias), gate_up (+ bias), down
        // (+ bias); each decays as transformers' Trainer groups its Hugging Face name
        const size_t attn = s.block_moe.size() - (go ? 6 : 3);
        CHECK(s.block_moe[attn].kind == TensorKind::Router);
        const model::UnitOffsets o = model::unit_offsets(s);
        CHECK((o.router_bias != model::kNoTensor) == go);
        CHECK((o.exp_gate_up_bias != model::kNoTensor) == go);
        CHECK((o.exp_down_bias != model::kNoTensor) == go);
        int experts = 0;
        for (const model::TensorInfo& t : l.tensors) {
            if (t.layer != 1) continue;
            CAPTURE(t.hf_name);
            CHECK(t.decay == trainer_decays(t.hf_name));
            experts += t.kind == TensorKind::ExpGateUp || t.kind == TensorKind::ExpDown;
        }
        CHECK(experts == 2);
        // the HF map: the hub's per-expert tensors (qwen3_moe, mixtral) or gpt_oss's fused
        // experts transposed, (E, C, 2I) and (E, I, C)
        int per_expert = 0, transposed = 0;
        for (const model::HfTensor& h : model::hf_tensors(l)) {
            if (h.name.rfind("model.layers.1.", 0) != 0) continue;
            per_expert += h.name.find(".experts.0.") != std::string::npos;
            if (!h.transposed) continue;
            transposed++;
            const bool gu = h.name == "model.layers.1.mlp.experts.gate_up_proj";
            CHECK(h.shape ==
                  (gu ? std::vector<int64_t>{4, 32, 96} : std::vector<int64_t>{4, 48, 32}));
        }
        CHECK(per_expert == (go ? 0 : 3));
        CHECK(transposed == (go ? 2 : 0));
    }
}

TEST_CASE("router losses: reported balance and z; the z-loss joins the loss; a dense model refuses "
          "it") {
    ArchConfig c = small(Arch::Qwen3Moe);
    c.num_experts = 4;
    c.experts_per_tok = 2;
    c.moe_intermediate_size = 16;
    const model::ParamLayout l = model::make_layout(c);
    std::vector<float> p(l.num_params);
    model::init_params(l, p.data(), 0.2f, 5);
    const int B = 2, T = 6;
    const std::vector<int> in = ids(B * T, 7, 3, c.vocab_size), tg = ids(B * T, 5, 1, c.vocab_size);
    model::FlatWeights w(l, p.data());
    auto run = [&](float zc, model::RouterLosses* rl) {
        model::ModelOptions o;
        o.router_z_loss_coef = zc;
        model::Transformer m(c, o, B, T);
        const float loss = m.forward(w, in.data(), tg.data(), B, T);
        *rl = m.router_losses();
        return loss;
    };
    model::RouterLosses off, on;
    const float ce = run(0.0f, &off), with_z = run(0.25f, &on);
    // reported whether or not they join the loss (the same values), and coef x z joins it
    CHECK(off.moe);
    CHECK(off.balance == on.balance);
    CHECK(off.z == on.z);
    CHECK(off.balance > 0.5);
    CHECK(off.z > 0.0);
    CHECK(with_z == doctest::Approx(ce + 0.25 * off.z).epsilon(1e-6));
    // a model without a sparse layer: nothing to report, and the option is refused by its key
    c.mlp_only_layers = {0, 1, 2};
    model::RouterLosses dense;
    CHECK_FALSE(model::Transformer(c, model::ModelOptions{}, B, T).router_losses().moe);
    try {
        run(0.25f, &dense);
        FAIL("a model without a sparse layer took model.router_z_loss_coef");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("model.router_z_loss_coef") != std::string::npos);
    }
}
