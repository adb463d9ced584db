// The planner at long sequences (issue 18): the 13B decks (1M on the paper's GH200, the longest T
// on GH200 and on Alps), what tiling and offloaded checkpoints change, the checkpoints' host
// bytes and link time, and the Ulysses degree checks.
#include <doctest/doctest.h>

#include <string>

#include "config/deck.h"
#include "core/error.h"
#include "model/activations.h"
#include "model/model_config.h"
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

TEST_CASE("the longest T of the shipped decks: 3.06M on 8 GH200, 2.31M on 8 Alps GH200") {
    const config::Config g = deck("llama-13b-3m-gh200.yaml");
    CHECK(g.train.seq_len >= 3 * 1048576);
    CHECK(plan_of(g, "gh200.yaml").fits);
    const std::string longer = std::to_string(g.train.seq_len + 65536);
    CHECK_FALSE(plan_of(deck("llama-13b-3m-gh200.yaml",
                             {"model.max_seq_len=" + longer, "train.seq_len=" + longer}),
                        "gh200.yaml")
                    .fits);
    const config::Config a = deck("llama-13b-2m-alps.yaml");
    const Plan pa = plan_of(a, "gh200-alps.yaml");
    CHECK(pa.fits);
    CHECK(pa.host_capacity_bytes == doctest::Approx(128e9));
    const std::string along = std::to_string(a.train.seq_len + 65536);
    CHECK_FALSE(plan_of(deck("llama-13b-2m-alps.yaml",
                             {"model.max_seq_len=" + along, "train.seq_len=" + along}),
                        "gh200-alps.yaml")
                    .fits);
    // on Alps Grace memory is what limits: all 39 block inputs on the host do not fit at 2.31M
    CHECK_FALSE(
        plan_of(deck("llama-13b-2m-alps.yaml", {"model.device_checkpoints=0"}), "gh200-alps.yaml")
            .mem.host_fits);
}

TEST_CASE("offloaded checkpoints: host bytes, link time over the profile, hidden behind blocks") {
    const config::Config c = deck("llama-13b-1m-gh200.yaml");
    const HardwareProfile hw = load_hardware(kSrc + "/inputs/hardware/gh200.yaml");
    const model::ArchConfig m = model::config_for(c.model);
    const CostInputs ci = make_cost_inputs(c, m, hw, 8);
    const double one = 131072.0 * 5120 * 2; // one block input, bf16
    CHECK(ci.activation_host_bytes == doctest::Approx(39 * one));
    CHECK(ci.ckpt_link_s ==
          doctest::Approx(39 * (transfer_seconds(hw.d2h, one) + transfer_seconds(hw.h2d, one))));
    CHECK(ci.ckpt_fwd_exposed_s == 0.0); // ~3 ms per copy against seconds per block
    CHECK(ci.ckpt_bwd_exposed_s == 0.0);
    // 14 kept on the device: 25 cross the link
    const config::Config k = deck("llama-13b-1m-gh200.yaml", {"model.device_checkpoints=14"});
    const CostInputs ck = make_cost_inputs(k, m, hw, 8);
    CHECK(ck.activation_host_bytes == doctest::Approx(25 * one));
    CHECK(ck.activation_bytes - ci.activation_bytes == doctest::Approx(14 * one));
    CHECK(ck.ckpt_link_s == doctest::Approx(25.0 / 39.0 * ci.ckpt_link_s));
    // a link too slow for the blocks shows up as exposed time
    HardwareProfile slow = hw;
    for (BandwidthPoint& q : slow.h2d)
        q.gbps = 0.01;
    const CostInputs cs = make_cost_inputs(c, m, slow, 8);
    CHECK(cs.ckpt_bwd_exposed_s > 0.0);
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
