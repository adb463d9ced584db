// The planner on the LLaMA family: the activation model by hand, GQA in the attention FLOPs and the
// Ulysses volume, and the decks inputs/llama3-8b-gh200.yaml, qwen3-14b-gh200.yaml and
// llama3-70b-gh200x4.yaml on gh200.yaml (published parameter totals, fits and placement).
#include <doctest/doctest.h>

#include <cmath>

#include "ckpt/model_source.h"
#include "config/deck.h"
#include "model/layout.h"
#include "model/model.h"
#include "plan/comm_model.h"
#include "plan/cost.h"
#include "model/model_config.h"
#include "plan/planner.h"

using namespace sof;
using namespace sof::plan;

namespace {

const std::string kSrc = SOF_SOURCE_DIR;

// The deck's keys without the file-system checks (its token shards are the user's and not in the
// repository): the planner needs only shapes and options.
config::Config deck(const std::string& name) {
    std::string path = kSrc + "/inputs/" + name;
    return config::parse_deck_text(config::read_yaml_file(path, "deck"), path);
}

HardwareProfile gh200() {
    return load_hardware(kSrc + "/inputs/hardware/gh200.yaml");
}

model::ArchConfig small_llama() {
    model::ArchConfig m;
    m.arch = model::Arch::Llama;
    model::apply_arch_defaults(&m);
    m.num_layers = 3;
    m.num_heads = 4;
    m.num_kv_heads = 2;
    m.channels = 64;
    m.intermediate_size = 176;
    m.vocab_size = 300;
    m.padded_vocab_size = 384;
    m.max_seq_len = 32;
    m.tie_embeddings = false;
    return m;
}

} // namespace

// A device allocation as the planner counts it (256-byte granules).
double r256(double bytes) {
    return std::ceil(bytes / 256.0) * 256.0;
}

TEST_CASE("LLaMA activations: the driver's buffers of one block, by hand; linear in T") {
    model::ArchConfig m = small_llama();
    const double B = 2, T = 16, tokens = B * T, eb = 2, C = 64, W = 64 + 2 * 32, Q = 64, I = 176;
    // per block: norm outputs, qkv, attention output, residual after attention, gate|up and
    // silu(gate)*up in the activation dtype; the two norms' rstd and the attention row lse (NH)
    // in fp32. No (B, NH, T, T) term: attention keeps only lse.
    const double per_layer = r256(tokens * C * eb) * 3 + r256(tokens * W * eb) +
                             r256(tokens * Q * eb) + r256(tokens * 2 * I * eb) +
                             r256(tokens * I * eb) + r256(tokens * 4) * 2 + r256(tokens * 4 * 4);
    ActivationEstimate a = activation_estimate(m, B, T, 1, eb, false);
    CHECK(a.per_layer == doctest::Approx(per_layer));
    CHECK(a.blocks == doctest::Approx(3 * per_layer + r256(4 * tokens * C * eb)));
    CHECK(a.logits == doctest::Approx(r256(tokens * 384 * eb)));
    // recompute: one block's working set and the residual stream (the L+1 block inputs)
    ActivationEstimate r = activation_estimate(m, B, T, 1, eb, true);
    CHECK(r.per_layer == doctest::Approx(per_layer));
    CHECK(r.layer_inputs == doctest::Approx(4 * tokens * C * eb));
    CHECK(r.total == doctest::Approx(a.total - 2 * per_layer));
    // GQA: each kv head fewer saves 2*hd of the fused qkv row
    model::ArchConfig mha = m;
    mha.num_kv_heads = 4;
    CHECK(activation_estimate(mha, B, T, 1, eb, false).per_layer - a.per_layer ==
          doctest::Approx(2 * 2 * 16 * tokens * eb));
    // qwen3's qk-norm keeps the raw projections and the per-head rstd of q and k
    model::ArchConfig q3 = m;
    q3.arch = model::Arch::Qwen3;
    model::apply_arch_defaults(&q3);
    REQUIRE(q3.qk_norm);
    CHECK(activation_estimate(q3, B, T, 1, eb, false).per_layer - a.per_layer ==
          doctest::Approx(tokens * W * eb + r256(tokens * 4 * 4) + r256(tokens * 2 * 4)));
    // linear in T: twice the sequence, twice the block buffers (no T x T anywhere)
    CHECK(activation_estimate(m, B, 2 * T, 1, eb, false).per_layer ==
          doctest::Approx(2 * per_layer).epsilon(0.01)); // up to the 256-byte rounding
    // Ulysses sp = 2: half the tokens per rank, plus the head-layout copies of q, k|v and the
    // attention output, less the token-layout q|k|v (the exchange copies it out; its buffer is
    // the backward's dqkv)
    ActivationEstimate u = activation_estimate(m, B, 2 * T, 2, eb, false);
    CHECK(u.per_layer == doctest::Approx(per_layer + tokens * (Q + W) * eb - tokens * W * eb));
}

TEST_CASE("GPT-2 activations: the driver's buffers, by hand") {
    model::ArchConfig g; // GPT-2 124M shapes
    const double B = 4, T = 64, tokens = B * T, C = 768, eb = 4;
    ActivationEstimate a = activation_estimate(g, B, T, 1, eb, false);
    // ln1, qkv (3C), attention out, res2, ln2, fc pre-GELU (4C) and post-GELU (4C): 15C; the two
    // LayerNorms' mean and rstd and the 12 heads' lse in fp32
    const double per_layer = tokens * (15 * C * eb + (4 + 12) * 4);
    CHECK(a.per_layer == doctest::Approx(per_layer));
    CHECK(a.logits == doctest::Approx(tokens * 50304 * eb));
    CHECK(a.blocks == doctest::Approx(12 * per_layer + 13 * tokens * C * eb));
}

TEST_CASE("cost inputs of a LLaMA deck: sizes from the layout, GQA attention FLOPs") {
    config::Config c = deck("llama3-8b-gh200.yaml");
    model::ArchConfig m = model::config_for(c.model);
    HardwareProfile hw = gh200();
    CostInputs ci = make_cost_inputs(c, m, hw);
    const double C = 4096, I = 14336, Vp = 128256, KV = 1024;
    CHECK(ci.embed_params == Vp * C);                                       // no position table
    CHECK(ci.head_params == Vp * C + C);                                    // lnf + untied lm_head
    CHECK(ci.layer_params == 2 * C + C * (C + 2 * KV) + C * C + 3 * C * I); // norms, qkv, o, MLP
    CHECK(ci.params == Vp * C + 32 * ci.layer_params + Vp * C + C);
    // forward: 2*tokens*(blocks + LM head) + causal attention 4*L*B*(T(T+1)/2)*NH*hd (the tiled
    // kernels skip the masked half); backward 3x (recompute)
    const double tokens = 4096;
    double flops =
        2 * tokens * (32 * ci.layer_params + Vp * C) + 4.0 * 32 * (4096.0 * 4097 / 2) * C;
    CHECK(ci.fwd_s == doctest::Approx(flops / (989e12 * 0.75)));
    // backward: 2x the forward + the recompute's forward + FlashAttention's recomputed scores
    // (half the attention forward); B*T = 4096 is one loss tile (no head recompute)
    const double attention = 4.0 * 32 * (4096.0 * 4097 / 2) * C;
    CHECK(ci.bwd_s == doctest::Approx(3 * ci.fwd_s + 0.5 * attention / (989e12 * 0.75)));
    CHECK(ci.activation_bytes ==
          doctest::Approx(activation_estimate(m, 1, 4096, 1, 2, true).total));
}

TEST_CASE("Ulysses all-to-all volume with GQA: q, k, v out and the attention output back") {
    model::ArchConfig m = small_llama(); // Q = 64, KV = 32
    model::ParamLayout l = model::make_layout(m);
    const int B = 2, T = 16, P = 2, ga = 3;
    CommVolume v = comm_per_step(l, 2, P, 1, B, T, ga, false);
    double per_layer = (P - 1) * B * (T / P) * ((2.0 * 64 + 2.0 * 32) / P) * 4;
    CHECK(v.alltoall == doctest::Approx(per_layer * 3 * 2 * ga));
}

TEST_CASE("decks on one GH200: parameter counts, fits and placement (docs/planner.md)") {
    HardwareProfile hw = gh200();
    struct Case {
        const char* deck;
        double published; // parameters, Hugging Face model cards
        int ranks;
        config::WeightsPolicy weights;
    };
    for (const Case& k :
         {Case{"llama3-8b-gh200.yaml", 8.03e9, 1, config::WeightsPolicy::Stationary},
          Case{"qwen3-14b-gh200.yaml", 14.8e9, 1, config::WeightsPolicy::Stationary},
          Case{"llama3-70b-gh200x4.yaml", 70.6e9, 4, config::WeightsPolicy::Flow}}) {
        INFO(k.deck);
        config::Config c = deck(k.deck);
        model::ArchConfig m = model::config_for(c.model);
        CHECK(m.llama_family());
        CHECK(!m.tie_embeddings);
        double n = static_cast<double>(model::make_layout(m).num_params);
        CHECK(std::abs(n / k.published - 1) < 0.005);
        Plan p = make_plan(c, m, hw, k.ranks);
        CHECK(p.num_params == n);
        CHECK(p.fits);
        CHECK(p.mem.device_fits);
        CHECK(p.mem.host_fits);
        CHECK(p.weights == k.weights);
        CHECK(p.mem.total <= p.capacity_bytes);
        CHECK(p.mem.host_total <= p.host_capacity_bytes);
    }
}

// Issue 26: the release's models from their published config.json alone (inputs/hf/, no
// weights), at its setting (T 4096, batch 4), as `plan` reads model.init_from: Phi-4 and
// Qwen3-14B on one GH200, Seed-OSS-36B on two (ZeRO-3); each fits, with an MFU the plan states.
TEST_CASE("the release's models from config.json: Phi-4, Qwen3-14B one GH200, Seed-OSS-36B two") {
    HardwareProfile hw = gh200();
    struct Case {
        const char* deck;
        const char* init_from;
        double published; // parameters, Hugging Face model cards / safetensors index
        int ranks;
        model::Arch arch;
    };
    for (const Case& k :
         {Case{"phi4-gh200.yaml", "hf/phi-4", 14.66e9, 1, model::Arch::Phi3},
          Case{"qwen3-14b-gh200.yaml", "hf/qwen3-14b", 14.8e9, 1, model::Arch::Qwen3},
          Case{"seed-oss-36b-gh200x2.yaml", "hf/seed-oss-36b", 36.151104512e9, 2,
               model::Arch::SeedOss}}) {
        INFO(k.deck);
        config::Config c = deck(k.deck);
        c.model.init_from = kSrc + "/inputs/" + k.init_from;
        c.model.num_layers = 1; // the deck's own model keys must not matter
        c.train.batch_size = 4;
        c.train.seq_len = 4096;
        const model::ArchConfig m = ckpt::resolve_model(&c);
        CHECK(m.arch == k.arch);
        CHECK(c.model.num_layers == m.num_layers); // the effective deck names the model
        ckpt::check_run_shape(c, m);
        const double n = static_cast<double>(model::make_layout(m).num_params);
        CHECK(std::abs(n / k.published - 1) < 0.005);
        Plan p = make_plan(c, m, hw, k.ranks);
        CHECK(p.num_params == n);
        CHECK(p.fits);
        CHECK(p.mem.device_fits);
        CHECK(p.mem.host_fits);
        MESSAGE(k.deck << ": predicted MFU " << 100.0 * p.mfu << "%");
        CHECK(p.mfu > 0.3); // the compute-bound setting (docs/planner.md: 54-55%)
        CHECK(p.mfu < 0.75);
    }
}

TEST_CASE("what does not fit, and on which side") {
    HardwareProfile hw = gh200();
    // Qwen3-14B with exact rollback (two host state sets) fits the host since the engine keeps no
    // whole-model working-weight or second grad copy: 24 + 4 B/param (pinned fp32 grads, the
    // deck accumulates 16 micro-batches) + staging
    config::Config q = deck("qwen3-14b-gh200.yaml");
    q.offload.rollback = config::Rollback::Exact;
    Plan p = make_plan(q, model::config_for(q.model), hw);
    CHECK(p.fits);
    CHECK(p.mem.host_total > 28.0 * p.num_params);
    CHECK(p.mem.host_total < 30.0 * p.num_params);
    // ... stationary weights fit its GPU in bf16 (bf16 working weights + fp32 grads: 6 B/param,
    // 88.6 GB of 93.8) but not in fp32 (fp32 working weights + grads: 8 B/param)
    config::Config qs = deck("qwen3-14b-gh200.yaml");
    qs.offload.weights = config::WeightsPolicy::Stationary;
    Plan pb = make_plan(qs, model::config_for(qs.model), hw);
    CHECK(pb.mem.device_fits);
    CHECK(pb.mem.weights == doctest::Approx(2.0 * pb.num_params).epsilon(0.01));
    qs.train.dtype = config::Precision::FP32;
    Plan ps = make_plan(qs, model::config_for(qs.model), hw);
    CHECK(!ps.mem.device_fits);
    CHECK(ps.why.find("device memory") != std::string::npos);
    // the decks say rollback: auto: exact where it fits (Qwen3-14B), inverse with its reason
    // where it does not (Llama-70B on four)
    config::Config qa = deck("qwen3-14b-gh200.yaml");
    REQUIRE(qa.offload.rollback == config::Rollback::Auto);
    CHECK(make_plan(qa, model::config_for(qa.model), hw).rollback == config::Rollback::Exact);
    config::Config la = deck("llama3-70b-gh200x4.yaml");
    Plan pa = make_plan(la, model::config_for(la.model), hw, 4);
    CHECK(pa.rollback == config::Rollback::Inverse);
    REQUIRE(!pa.auto_notes.empty());
    bool why = false;
    for (const std::string& n : pa.auto_notes)
        why |= n.find("rollback: inverse") != std::string::npos &&
               n.find("drift") != std::string::npos;
    CHECK(why);
    config::Config resolved = la;
    resolve_auto(resolved, pa);
    CHECK(resolved.offload.rollback == config::Rollback::Inverse);
    // Llama-3-70B on one GH200: host memory (~16 B/param even with inverse rollback)
    config::Config l = deck("llama3-70b-gh200x4.yaml");
    Plan one = make_plan(l, model::config_for(l.model), hw, 1);
    CHECK(!one.mem.host_fits);
    CHECK(one.mem.host_total > 2 * hw.cpu_memory_gb * 1e9);
    // on four with exact rollback: host memory again
    config::Config lx = deck("llama3-70b-gh200x4.yaml");
    lx.offload.rollback = config::Rollback::Exact;
    Plan four = make_plan(lx, model::config_for(lx.model), hw, 4);
    CHECK(four.mem.device_fits);
    CHECK(!four.mem.host_fits);
}

TEST_CASE("ZeRO-3 collectives: hidden behind compute in one node, exposed across nodes") {
    // Llama-70B on GH200s: 4 ranks = one node (NVLink, 150 GB/s), 8 ranks = two nodes
    // (Slingshot-11, 25 GB/s per Superchip); the bytes are comm_model.h's, bf16 gathers
    config::Config c = deck("llama3-70b-gh200x4.yaml");
    const model::ArchConfig m = model::config_for(c.model);
    const HardwareProfile hw = gh200();
    for (int ranks : {4, 8}) {
        CAPTURE(ranks);
        const Plan p = make_plan(c, m, hw, ranks);
        const CommVolume v =
            comm_per_step(model::make_layout(m), ranks, 1, 3, c.train.batch_size, c.train.seq_len,
                          c.train.grad_accum, c.model.recompute, 2);
        CHECK(p.comm_bytes == v.total());
        const double gbps = ranks <= 4 ? 150.0 : 25.0;
        CHECK(p.comm_s == doctest::Approx(v.total() / (gbps * 1e9)));
        CHECK(p.comm_exposed_s == doctest::Approx(std::max(0.0, p.comm_s - p.compute_s)));
        // the schedule's own time plus what the collectives leave exposed
        const IterationTimes& so = p.schedules[0];
        CHECK(p.iteration_s == doctest::Approx(so.iteration + p.comm_exposed_s));
        if (ranks == 4) CHECK(p.comm_exposed_s == 0.0);
        if (ranks == 8) CHECK(p.comm_exposed_s > 100.0); // ~314 s of traffic vs ~53 s compute
    }
    // fp32 gathers (debug.fp32_gathers) move twice the allgather bytes where the slots are fp32
    // (the host device's fp32 model); a model that reads bf16 (the GPU) has bf16 slots
    c.debug.fp32_gathers = true;
    const Plan f = make_plan(c, m, default_host_profile(), 4);
    const CommVolume v32 = comm_per_step(model::make_layout(m), 4, 1, 3, c.train.batch_size,
                                         c.train.seq_len, c.train.grad_accum, c.model.recompute, 4);
    CHECK(f.comm_bytes == v32.total());
    const CommVolume v16 = comm_per_step(model::make_layout(m), 4, 1, 3, c.train.batch_size,
                                         c.train.seq_len, c.train.grad_accum, c.model.recompute, 2);
    CHECK(v32.allgather == 2 * v16.allgather);
    CHECK(make_plan(c, m, hw, 4).comm_bytes == v16.total());
    CHECK(v32.reduce_scatter == v16.reduce_scatter);
    // a profile without a network section: bytes, no time
    const Plan h = make_plan(c, m, load_hardware(kSrc + "/inputs/hardware/h100-pcie.yaml"), 4);
    CHECK(h.comm_bytes > 0);
    CHECK(h.comm_s == 0.0);
}

TEST_CASE("a mixture-of-experts model: FLOPs from the active params, memory from all of them") {
    HardwareProfile hw = gh200();
    // Qwen3-14B's shape with 8 experts of width 1024 (top 2) in every block but block 0
    config::Config q = deck("qwen3-14b-gh200.yaml");
    q.model.type = config::ModelType::Qwen3Moe;
    q.model.num_experts = 8;
    q.model.num_experts_per_tok = 2;
    q.model.moe_intermediate_size = 1024;
    q.model.mlp_only_layers = std::string(1, '0'); // (= "0": GCC 12 -Wrestrict false positive)
    config::Config all = q;                        // the same parameters, every expert computing
    all.model.num_experts_per_tok = 8;
    const model::ArchConfig m = model::config_for(q.model), ma = model::config_for(all.model);
    const model::ParamLayout lay = model::make_layout(m);
    const double L = m.num_layers, C = m.channels, sparse = L - 1;
    const model::BlockParams b = model::block_params(m), ba = model::block_params(ma);
    CHECK(b.total == doctest::Approx(static_cast<double>(lay.unit_begin[m.num_layers + 1] -
                                                         lay.unit_begin[1])));
    CHECK(b.total - b.active == doctest::Approx((8 - 2) * 3.0 * 1024 * C * sparse));
    CHECK(ba.active == doctest::Approx(ba.total));
    CHECK(ba.total == doctest::Approx(b.total));

    Plan p = make_plan(q, m, hw), pa = make_plan(all, ma, hw);
    CHECK(p.num_params == doctest::Approx(pa.num_params));
    CHECK(p.mem.host_total == doctest::Approx(pa.mem.host_total));
    // model FLOPs = 3 x forward = 3 x 2 x tokens x params: the 6 idle experts of each sparse block
    const double tokens = q.train.batch_size * q.train.seq_len * q.train.grad_accum;
    CHECK(pa.model_flops - p.model_flops ==
          doctest::Approx(6.0 * tokens * (b.total - b.active)).epsilon(1e-9));
    // the plan says which term bounds the step; a dense model gets no such line
    auto moe_line = [](const Plan& pl) {
        for (const std::string& n : pl.notes)
            if (n.find("mixture of experts") != std::string::npos) return n;
        return std::string();
    };
    CHECK(moe_line(p).find("the longest term is") != std::string::npos);
    CHECK(moe_line(pa).empty()); // every expert computing: active == total
    config::Config d = deck("qwen3-14b-gh200.yaml");
    CHECK(moe_line(make_plan(d, model::config_for(d.model), hw)).empty());

    // Qwen3-30B-A3B from its published config.json on two GH200 (ZeRO-3) at the release's setting:
    // 30.5B params, 3.3B active (Qwen's count: with the embedding and the LM head); it fits, and
    // the CPU's step over all of them, not the compute, is the longest term (docs/planner.md)
    config::Config c = deck("qwen3-30b-a3b-gh200x2.yaml");
    c.model.init_from = kSrc + "/inputs/hf/qwen3-30b-a3b";
    const model::ArchConfig mq = ckpt::resolve_model(&c);
    CHECK(mq.arch == model::Arch::Qwen3Moe);
    const double n = static_cast<double>(model::make_layout(mq).num_params);
    CHECK(std::abs(n / 30.5e9 - 1) < 0.005);
    const model::BlockParams bq = model::block_params(mq);
    const double active = bq.active + 2.0 * mq.padded_vocab_size * mq.channels;
    CHECK(std::abs(active / 3.3e9 - 1) < 0.03);
    Plan pq = make_plan(c, mq, hw, 2);
    CHECK(pq.fits);
    MESSAGE(moe_line(pq));
    CHECK(moe_line(pq).find("the longest term is the optimizer step") != std::string::npos);
}

namespace {

const GapLever* lever(const Plan& p, const std::string& settings) {
    for (const GapLever& l : p.levers)
        if (l.settings == settings) return &l;
    return nullptr;
}

} // namespace

// Issue 27 section 3: the CPU step over all 30.5B parameters outlasts the compute of the 3.3B
// active ones; the planner prices what closes the gap, each lever by its own plan, and takes leaner
// moments where the deck says `auto` (docs/planner.md "Closing the CPU-step gap").
TEST_CASE("the CPU-step gap of a MoE model: levers priced, the moments chosen only when auto") {
    HardwareProfile hw = gh200();
    config::Config c = deck("qwen3-30b-a3b-gh200x2.yaml");
    c.model.init_from = kSrc + "/inputs/hf/qwen3-30b-a3b";
    const model::ArchConfig m = ckpt::resolve_model(&c);
    REQUIRE(c.optimizer.state_dtype == config::StateDtype::Auto);
    config::Config f32 = c;
    f32.optimizer.state_dtype = config::StateDtype::FP32;
    const Plan f = make_plan(f32, m, hw, 2);
    CHECK(f.state_dtype == config::StateDtype::FP32);
    CHECK(f.before_s == 0); // the deck fixed the moments: nothing chosen
    CHECK(f.exposed_s > 0.05 * f.iteration_s);
    const GapLever* bf = lever(f, "optimizer.state_dtype=bf16");
    REQUIRE(bf);
    CHECK(bf->fits);
    CHECK(!bf->chosen);
    CHECK(bf->tail_buckets > f.tail_buckets); // 6 bytes per param less on the device
    config::Config b16 = c;
    b16.optimizer.state_dtype = config::StateDtype::BF16;
    const Plan pb = make_plan(b16, m, hw, 2);
    CHECK(bf->iteration_s == pb.iteration_s); // the lever is that deck's own plan
    CHECK(pb.iteration_s < 0.95 * f.iteration_s);
    // the same 32768 tokens in one micro-batch of 8 hide more than accumulating twice as many
    const GapLever* big = lever(f, "train.batch_size=8 + train.grad_accum=1");
    const GapLever* acc = lever(f, "train.batch_size=4 + train.grad_accum=4");
    REQUIRE(big);
    REQUIRE(acc);
    CHECK(big->tokens == f.tokens);
    CHECK(acc->tokens == 2 * f.tokens);
    CHECK(big->fits);
    CHECK(big->iteration_s < f.iteration_s);
    CHECK(acc->iteration_s / acc->tokens < f.iteration_s / f.tokens); // spread over more tokens
    CHECK(big->iteration_s / big->tokens < acc->iteration_s / acc->tokens);

    // auto: bf16 moments taken (more than 5% faster; q8 not 2% faster than bf16), before/after
    const Plan a = make_plan(c, m, hw, 2);
    CHECK(a.state_dtype == config::StateDtype::BF16);
    CHECK(a.before_s == f.iteration_s);
    CHECK(a.iteration_s == pb.iteration_s);
    CHECK(a.tail_buckets == pb.tail_buckets);
    REQUIRE(lever(a, "optimizer.state_dtype=bf16"));
    CHECK(lever(a, "optimizer.state_dtype=bf16")->chosen);
    bool explained = false;
    for (const ModeChoice& mc : a.mode_choices)
        if (mc.key == "optimizer.state_dtype") {
            CHECK(!mc.from_deck);
            CHECK(mc.other_step_s == f.iteration_s - f.comm_exposed_s);
            explained = mc.line.find("shorten the step") != std::string::npos;
        }
    CHECK(explained);
    config::Config r = c; // the trainer's deck after the plan: the choice, then no gap choice
    resolve_auto(r, a);
    CHECK(r.optimizer.state_dtype == config::StateDtype::BF16);

    // a plan whose CPU step is hidden has no levers (Llama-3-8B on one GH200: 1.7% exposed)
    config::Config d = deck("llama3-8b-gh200.yaml");
    d.optimizer.state_dtype = config::StateDtype::Auto;
    const Plan h = make_plan(d, model::config_for(d.model), hw);
    CHECK(h.exposed_s <= 0.05 * h.iteration_s);
    CHECK(h.levers.empty());
    CHECK(h.before_s == 0);
    CHECK(h.state_dtype == config::StateDtype::FP32);
}

// GPT-OSS-20B from its published config.json on one GH200 at the release's setting (sequence
// 8192, batch 4, recompute): 20.9B parameters, 3.6B active (OpenAI's count: blocks' active and
// the unembedding); it fits, compute is the longest term, and the superoffload schedule hides
// what the synchronous (ZeRO-Offload) one exposes.
TEST_CASE("GPT-OSS-20B on one GH200 from config.json: fits at sequence 8192, batch 4") {
    HardwareProfile hw = gh200();
    config::Config c = deck("gpt-oss-20b-gh200.yaml");
    c.model.init_from = kSrc + "/inputs/hf/gpt-oss-20b";
    const model::ArchConfig m = ckpt::resolve_model(&c);
    CHECK(m.arch == model::Arch::GptOss);
    CHECK(c.train.seq_len == 8192);
    CHECK(c.train.batch_size == 4);
    CHECK(c.model.recompute);
    const double n = static_cast<double>(model::make_layout(m).num_params);
    CHECK(std::abs(n / 20.91e9 - 1) < 0.005);
    const double active = model::block_params(m).active + double(m.vocab_size) * m.channels;
    CHECK(std::abs(active / 3.61e9 - 1) < 0.01);
    const Plan p = make_plan(c, m, hw, 1);
    CHECK(p.fits);
    MESSAGE("GPT-OSS-20B: " << p.iteration_s << " s per step, MFU " << 100 * p.mfu << "%");
    CHECK(p.mfu > 0.3);
    for (const std::string& note : p.notes)
        if (note.find("mixture of experts") != std::string::npos)
            CHECK(note.find("the longest term is compute") != std::string::npos);
    const IterationTimes& sync = p.schedules[2];
    CHECK(sync.schedule == "synchronous");
    CHECK(p.iteration_s < 0.8 * sync.iteration);
}
