// The planner at long sequences (issue 18): the 13B decks (1M on the paper's GH200, the longest T
// on GH200 and on Alps), what tiling and offloaded checkpoints change, the checkpoints' host
// bytes and link time, and the Ulysses degree checks.
#include <doctest/doctest.h>

#include <string>

#include "config/deck.h"
#include "core/error.h"
#include "model/activations.h"
#include "model/model_config.h"
#include "offload/memory_plan.h"
#include "plan/cost.h"
#include "plan/long_seq.h"
#include "plan/planner.h"

using namespace sof;
using namespace sof::plan;

namespace {

const std::string kSrc = SOF_SOURCE_DIR;

config::Config deck(const std::string& name, const std::vector<std::string>& set = {}) {
    return config::load_deck(kSrc + "/inputs/" + name, set, config::DeckChecks::NoFiles);
}

Plan plan_of(const config::Config& c, const std::string& hw) {
    return make_plan(c, model::config_for(c.model), load_hardware(kSrc + "/inputs/hardware/" + hw),
                     8);
}

} // namespace

TEST_CASE("13B x 1M tokens on 8 GH200 (sp 8): fits with tiles and offloaded checkpoints") {
    const config::Config c = deck("llama-13b-1m-gh200.yaml");
    const Plan p = plan_of(c, "gh200.yaml");
    CHECK(p.fits);
    CHECK(p.num_params == doctest::Approx(12.64e9).epsilon(0.01));
    // the device holds no (T, V) logits, no (T, I) MLP buffers and two residual slots
    const model::ArchConfig m = model::config_for(c.model);
    const model::ActShape a = activation_shape(c, 2.0);
    CHECK(model::loss_rows(a) == 4096);
    CHECK(model::mlp_rows(a) == 4096);
    CHECK(p.mem.activations < 25e9);
    // 39 block inputs of 131072 x 5120 bf16 in Grace memory
    CHECK(p.mem.host_activations == doctest::Approx(39.0 * 131072 * 5120 * 2));
    CHECK(p.mem.host_total < 480e9);
    // compute-bound: the model's MFU is the achievable fraction x model FLOPs / executed FLOPs
    CHECK(p.mfu > 0.45);
    CHECK(p.mfu < 0.56);
    // without the long-sequence machinery it does not fit
    const config::Config bare =
        deck("llama-13b-1m-gh200.yaml",
             {"model.loss_tile=0", "model.mlp_tile=0", "model.offload_checkpoints=false"});
    const Plan pb = plan_of(bare, "gh200.yaml");
    CHECK_FALSE(pb.fits);
    CHECK(pb.mem.activations > 2 * p.mem.activations);
    (void)m;
}

TEST_CASE("the longest T of the shipped decks: 4.65M on 8 GH200, 2.56M on 8 Alps GH200") {
    auto at = [](const std::string& name, int T, std::vector<std::string> more = {}) {
        more.push_back("model.max_seq_len=" + std::to_string(T));
        more.push_back("train.seq_len=" + std::to_string(T));
        return deck(name, more);
    };
    // past Arctic Long Sequence Training's 3.7M tokens (Llama-8B on 8 H100) and 4 x 2^20
    const config::Config g = deck("llama-13b-4m-gh200.yaml");
    CHECK(g.train.seq_len >= 4 * 1048576);
    const Plan pg = plan_of(g, "gh200.yaml");
    CHECK(pg.fits);
    CHECK(pg.weights == config::WeightsPolicy::Flow);
    CHECK_FALSE(plan_of(at("llama-13b-4m-gh200.yaml", g.train.seq_len + 65536), "gh200.yaml").fits);
    // on Alps Grace memory is what limits: with fp32 moments the deck's T is the longest for any
    // number of checkpoints kept in HBM; bf16 moments fit two steps more
    const config::Config a = deck("llama-13b-2m-alps.yaml");
    const Plan pa = plan_of(a, "gh200-alps.yaml");
    CHECK(pa.fits);
    CHECK(pa.host_capacity_bytes == doctest::Approx(128e9));
    CHECK(pa.state_dtype == config::StateDtype::FP32);
    CHECK_FALSE(
        plan_of(deck("llama-13b-2m-alps.yaml", {"model.device_checkpoints=0"}), "gh200-alps.yaml")
            .mem.host_fits);
    const int along = a.train.seq_len + 65536;
    for (int k = 0; k <= 39; k++) {
        CAPTURE(k);
        const std::string K = "model.device_checkpoints=" + std::to_string(k);
        CHECK_FALSE(plan_of(at("llama-13b-2m-alps.yaml", along, {K}), "gh200-alps.yaml").fits);
    }
    const std::string bf16 = "optimizer.state_dtype=bf16";
    const int bf16_T = a.train.seq_len + 2 * 65536;
    CHECK(plan_of(at("llama-13b-2m-alps.yaml", bf16_T, {bf16, "model.device_checkpoints=8"}),
                  "gh200-alps.yaml")
              .fits);
    for (int k = 0; k <= 39; k++) {
        CAPTURE(k);
        const std::string K = "model.device_checkpoints=" + std::to_string(k);
        CHECK_FALSE(
            plan_of(at("llama-13b-2m-alps.yaml", bf16_T + 65536, {bf16, K}), "gh200-alps.yaml")
                .fits);
    }
}

TEST_CASE("the 13B's ZeRO-3 slots: bf16 gathers, the embedding / LM head in a slot of its own") {
    // 657M-parameter embedding and head units against 283M per block: slot 0 of each kind holds
    // the largest unit, the other two a block; the model reads bf16 on the GPU (bf16 slots, no
    // 16-bit staging), the host device's fp32 model gets fp32 slots and the 16-bit staging
    const config::Config c = deck("llama-13b-4m-gh200.yaml");
    const model::ArchConfig m = model::config_for(c.model);
    const CostInputs gpu =
        make_cost_inputs(c, m, load_hardware(kSrc + "/inputs/hardware/gh200.yaml"), 8);
    CHECK(gpu.work_bf16);
    const offload::MemoryPlanInputs& in = gpu.mem_base;
    CHECK(in.zero3_slice * 8 >= 128256u * 5120u);
    CHECK(in.zero3_block_slice * 8 < 300000000u);
    CHECK(static_cast<double>(in.zero3_slice) > 2.3 * static_cast<double>(in.zero3_block_slice));
    const offload::MemoryPlan z16 =
        offload::zero3_memory_plan(offload::zero3_slots(in, true, true), offload::MemSide::Device);
    const offload::MemoryPlan z32 =
        offload::zero3_memory_plan(offload::zero3_slots(in, true, false), offload::MemSide::Device);
    const double E = 8.0 * in.zero3_slice, Bk = 8.0 * in.zero3_block_slice;
    // gather 2 B (E + 2 Bk), grads 4 B (E + 2 Bk), slices, receive buffer 4 B E
    const double want16 = 2 * (E + 2 * Bk) + 4 * (E + 2 * Bk) + 4 * (E + 2 * Bk) / 8 + 4 * E;
    CHECK(static_cast<double>(z16.total(offload::MemSide::Device)) ==
          doctest::Approx(want16).epsilon(1e-6));
    // fp32 slots: 2 B more per gathered element, and the bf16 send and receive buffers
    CHECK(static_cast<double>(z32.total(offload::MemSide::Device)) ==
          doctest::Approx(want16 + 2 * (E + 2 * Bk) + 2 * E / 8 + 2 * E).epsilon(1e-6));
    // what every slot of the largest unit cost before (7 fp32 slots of E, 3 slices, bf16 staging)
    const double before = 7 * 4 * E + 3 * 4 * E / 8 + 2 * E / 8 + 2 * E;
    CHECK(static_cast<double>(z16.total(offload::MemSide::Device)) < 0.55 * before);
}

TEST_CASE("plan advice: weight flow's fallback counted, no advice the deck already follows") {
    // the 4M deck needs weight flow with the model's grads in pinned host memory (the device
    // ring does not fit): no warning that flow does not fit
    const Plan p = plan_of(deck("llama-13b-4m-gh200.yaml"), "gh200.yaml");
    CHECK(p.fits);
    for (const std::string& n : p.notes)
        CHECK(n.find("does not fit the device") == std::string::npos);
    // one step longer: the device advice names neither weight flow, recompute, offloaded
    // checkpoints nor tiles (the deck has them), but a shorter sequence and more ranks
    const config::Config c = deck("llama-13b-4m-gh200.yaml");
    const std::string T = std::to_string(c.train.seq_len + 65536);
    const Plan q =
        plan_of(deck("llama-13b-4m-gh200.yaml", {"model.max_seq_len=" + T, "train.seq_len=" + T}),
                "gh200.yaml");
    CHECK_FALSE(q.fits);
    CHECK(q.why.find("device memory") != std::string::npos);
    for (const char* has : {"offload.weights: flow", "model.recompute", "model.offload_checkpoints",
                            "model.loss_tile", "train.batch_size", "interleave_k"})
        CHECK_MESSAGE(q.why.find(has) == std::string::npos, has);
    CHECK(q.why.find("a shorter train.seq_len") != std::string::npos);
    CHECK(q.why.find("more ranks") != std::string::npos);
    bool warned = false;
    for (const std::string& n : q.notes)
        warned |= n.find("warning: even weight flow does not fit the device: use") == 0;
    CHECK(warned);
    // a deck without recompute and tiles is told to use them
    const Plan r = plan_of(
        deck("llama-13b-1m-gh200.yaml",
             {"model.recompute=false", "model.offload_checkpoints=false", "model.loss_tile=0"}),
        "gh200.yaml");
    CHECK_FALSE(r.fits);
    CHECK(r.why.find("model.recompute: true") != std::string::npos);
    CHECK(r.why.find("model.loss_tile") != std::string::npos);
    // host side (Alps, every checkpoint offloaded): the deck's inverse rollback and cast host are
    // not suggested again, fp32 moments and checkpoints in HBM are
    const Plan h =
        plan_of(deck("llama-13b-2m-alps.yaml", {"model.device_checkpoints=0"}), "gh200-alps.yaml");
    CHECK(h.why.find("host memory") != std::string::npos);
    CHECK(h.why.find("offload.rollback") == std::string::npos);
    CHECK(h.why.find("offload.cast") == std::string::npos);
    CHECK(h.why.find("optimizer.state_dtype: bf16") != std::string::npos);
    CHECK(h.why.find("model.device_checkpoints") != std::string::npos);
}

TEST_CASE("offloaded checkpoints: host bytes, link time over the profile, hidden behind blocks") {
    const config::Config c = deck("llama-13b-1m-gh200.yaml");
    const HardwareProfile hw = load_hardware(kSrc + "/inputs/hardware/gh200.yaml");
    const model::ArchConfig m = model::config_for(c.model);
    const CostInputs ci = make_cost_inputs(c, m, hw, 8);
    const double one = 131072.0 * 5120 * 2; // one block input, bf16
    CHECK(ci.long_seq.host_bytes == doctest::Approx(39 * one));
    CHECK(ci.long_seq.ckpt_link_s ==
          doctest::Approx(39 * (transfer_seconds(hw.d2h, one) + transfer_seconds(hw.h2d, one))));
    CHECK(ci.long_seq.ckpt_fwd_exposed_s == 0.0); // ~3 ms per copy against seconds per block
    CHECK(ci.long_seq.ckpt_bwd_exposed_s == 0.0);
    // 14 kept on the device: 25 cross the link
    const config::Config k = deck("llama-13b-1m-gh200.yaml", {"model.device_checkpoints=14"});
    const CostInputs ck = make_cost_inputs(k, m, hw, 8);
    CHECK(ck.long_seq.host_bytes == doctest::Approx(25 * one));
    CHECK(ck.activation_bytes - ci.activation_bytes == doctest::Approx(14 * one));
    CHECK(ck.long_seq.ckpt_link_s == doctest::Approx(25.0 / 39.0 * ci.long_seq.ckpt_link_s));
    // a link too slow for the blocks shows up as exposed time
    HardwareProfile slow = hw;
    for (BandwidthPoint& q : slow.h2d)
        q.gbps = 0.01;
    const CostInputs cs = make_cost_inputs(c, m, slow, 8);
    CHECK(cs.long_seq.ckpt_bwd_exposed_s > 0.0);
}

TEST_CASE("plan: heads or T not divisible by parallel.sp are refused naming both numbers") {
    config::Config c = deck("llama-13b-1m-gh200.yaml");
    c.parallel.sp = 16; // 40 heads do not split (model::validate: the first key that fails)
    CHECK_THROWS_WITH_AS(make_plan(c, model::config_for(c.model),
                                   load_hardware(kSrc + "/inputs/hardware/gh200.yaml"), 16),
                         doctest::Contains("model.num_heads = 40 is not divisible by "
                                           "parallel.sp = 16"),
                         core::Error);
    c.parallel.sp = 20; // 40 heads split, 8 kv heads do not
    CHECK_THROWS_WITH_AS(make_plan(c, model::config_for(c.model),
                                   load_hardware(kSrc + "/inputs/hardware/gh200.yaml"), 20),
                         doctest::Contains("model.num_kv_heads = 8 is not divisible by "
                                           "parallel.sp = 20"),
                         core::Error);
    c.parallel.sp = 8; // the heads split; the sequence does not
    c.train.seq_len -= 1;
    CHECK_THROWS_WITH_AS(make_plan(c, model::config_for(c.model),
                                   load_hardware(kSrc + "/inputs/hardware/gh200.yaml"), 8),
                         doctest::Contains(("train.seq_len = " + std::to_string(c.train.seq_len) +
                                            " is not divisible by parallel.sp = 8")
                                               .c_str()),
                         core::Error);
    // the deck check (what `check`, `plan` and `train` run first) says the same before any plan
    CHECK_THROWS_WITH_AS(model::validate_deck(deck("llama-13b-1m-gh200.yaml", {"parallel.sp=16"})),
                         doctest::Contains("not divisible by parallel.sp = 16"), core::Error);
}
