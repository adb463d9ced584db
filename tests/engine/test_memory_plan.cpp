// The engine's memory plan against its allocations and the planner (issue 12): device peak ==
// plan == `superoffload plan` for every schedule x placement; the interleaved schedule streams
// state through slots (bounded device memory, bitwise equal to plain); link bytes per step.
#include <doctest/doctest.h>

#include <string>

#include "core/error.h"
#include "device/host_device.h"
#include "engine_test_util.h"
#include "offload/engine.h"
#include "offload/memory_plan.h"
#include "zero/memory.h"
#include "model/transformer.h"
#include "plan/cost.h"
#include "plan/planner.h"

using namespace sof;
using sof::test::StepPlan;

namespace {

const core::Log kQuiet(0, core::LogLevel::Quiet);

std::vector<StepPlan> mixed_plan() {
    std::vector<StepPlan> p(5);
    p[1].clip = 1.0f; // clipped: speculative host steps re-run
    p[2].nan = true;  // skipped
    p[4].clip = 100.0f;
    return p;
}

struct Pair {
    std::unique_ptr<offload::Updater> ref;
    std::unique_ptr<offload::Engine> eng;
};

Pair make_pair(const config::Config& cfg, const model::ParamLayout& l, bool bf16w = false) {
    config::Config rc = cfg;
    rc.offload.enabled = false;
    config::Config ec = cfg;
    ec.offload.enabled = true;
    Pair p;
    p.ref = offload::make_updater(rc, l, kQuiet, nullptr);
    p.eng = std::make_unique<offload::Engine>(ec, l, kQuiet, nullptr, bf16w);
    test::init_state(*p.ref, l);
    test::init_state(*p.eng, l);
    return p;
}

const char* sched_name(config::Schedule s) {
    return s == config::Schedule::Interleaved
               ? "interleaved"
               : (s == config::Schedule::Synchronous ? "synchronous" : "superoffload");
}

// Ulysses as the model's allocation sees it: only the degree matters before a forward.
class FakeExchange : public model::SeqExchange {
  public:
    explicit FakeExchange(int p) : p_(p) {}
    int degree() const override { return p_; }
    int index() const override { return 0; }
    void to_heads(const void*, void*, void*, size_t, int, int, int, int) override {}
    void to_tokens(const void*, void*, void*, size_t, int, int, int, int) override {}

  private:
    int p_;
};

} // namespace

TEST_CASE("activations: the arena peak of a forward + backward equals the planner's figure") {
    // every (B, T, recompute, sp) with the loss and MLP untiled, tiled (a partial last tile) and
    // with offloaded checkpoints: the driver allocates its list once from the device, the
    // planner sums the same list (device side; the checkpoints on the host side), and a real
    // forward + backward allocates nothing more
    struct Long {
        int loss_tile, mlp_tile;
        bool offload;
        int kept; // offloaded checkpoints kept on the device
    };
    const Long longs[] = {
        {0, 0, false, 0}, {-1, -1, false, 0}, {5, 7, false, 0}, {5, 7, true, 0}, {0, 0, true, 1}};
    int runs = 0;
    for (model::Arch arch : {model::Arch::Gpt2, model::Arch::Llama, model::Arch::Qwen3})
        for (int B : {1, 3})
            for (int T : {8, 16})
                for (bool rec : {false, true})
                    for (int P : {1, 2})
                        for (const Long& lg : longs) {
                            if (lg.offload && !rec) continue;
                            model::ArchConfig a = test::tiny_gpt2();
                            a.arch = arch;
                            if (arch != model::Arch::Gpt2) {
                                model::apply_arch_defaults(&a);
                                a.num_kv_heads = 2;
                                a.intermediate_size = 40;
                            }
                            a.num_layers = 3;
                            a.max_seq_len = 32;
                            INFO(model::arch_name(arch)
                                 << " B=" << B << " T=" << T << " recompute=" << rec << " sp=" << P
                                 << " loss tile " << lg.loss_tile << " mlp tile " << lg.mlp_tile
                                 << " offload " << lg.offload);
                            device::HostDevice dev(size_t{1} << 30, nullptr);
                            FakeExchange ex(P);
                            model::ModelOptions o;
                            o.recompute = rec;
                            o.seq = &ex;
                            o.device = &dev;
                            o.loss_tile = lg.loss_tile;
                            o.mlp_tile = lg.mlp_tile;
                            o.offload_checkpoints = lg.offload;
                            o.device_checkpoints = lg.kept;
                            model::ActShape shape;
                            shape.B = B, shape.T = T, shape.P = P, shape.recompute = rec;
                            shape.loss_tile = lg.loss_tile, shape.mlp_tile = lg.mlp_tile;
                            shape.offload = lg.offload;
                            shape.device_ckpt = lg.kept;
                            const plan::ActivationEstimate e = plan::activation_estimate(a, shape);
                            {
                                model::Transformer m(a, o, B, T);
                                std::vector<float> params(m.layout().num_params, 0.01f);
                                std::vector<float> grads(params.size(), 0.0f);
                                std::vector<int> tok(static_cast<size_t>(B * T), 1);
                                model::FlatWeights w(m.layout(), params.data());
                                model::FlatGrads g(m.layout(), grads.data());
                                m.forward(w, tok.data(), tok.data(), B, T);
                                m.backward(w, g, 1.0f);
                                CHECK(static_cast<double>(dev.peak()) == e.total);
                                CHECK(static_cast<double>(dev.used()) == e.total);
                                CHECK(static_cast<double>(dev.pinned_used()) == e.host);
                                CHECK((e.host > 0) == lg.offload);
                                CHECK(static_cast<double>(m.activation_bytes()) <= e.total);
                                if (!lg.offload && lg.loss_tile < 0) // the deck-shaped wrapper
                                    CHECK(
                                        plan::activation_estimate(a, B, T * P, P, 4.0, rec).total ==
                                        e.total);
                            }
                            CHECK(dev.used() == 0); // all freed with the model
                            CHECK(dev.pinned_used() == 0);
                            runs++;
                        }
    CHECK(runs == 3 * 2 * 2 * (2 * 3 + 2 * 5));
}

TEST_CASE("memory plan: engine device peak == plan == planner, every schedule x placement") {
    model::ArchConfig g = test::tiny_gpt2();
    model::ParamLayout l = model::make_layout(g);
    int combos = 0;
    for (auto sched : {config::Schedule::SuperOffload, config::Schedule::Interleaved,
                       config::Schedule::Synchronous})
        for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow})
            for (auto dt : {config::Precision::FP32, config::Precision::BF16})
                for (auto cast : {config::CastAt::Host, config::CastAt::Device})
                    for (int tail : {0, 1})
                        for (int k : {1, 2, 3}) {
                            if (sched != config::Schedule::Interleaved && k > 1) continue;
                            if (dt == config::Precision::FP32 && cast == config::CastAt::Device)
                                continue; // cast is a bf16 option
                            if (!test::sweep_runs(combos++)) continue;
                            config::Config c = test::base_deck();
                            c.train.dtype = dt;
                            c.offload.enabled = true;
                            c.offload.schedule = sched;
                            c.offload.weights = w;
                            c.offload.cast = cast;
                            c.offload.gpu_tail_buckets = tail;
                            c.offload.interleave_k = k;
                            c.offload.bucket_mb = 0.05;
                            c.offload.rollback =
                                tail ? config::Rollback::Inverse : config::Rollback::Exact;
                            INFO(sched_name(sched)
                                 << " k=" << k << " flow=" << (w == config::WeightsPolicy::Flow)
                                 << " bf16=" << (dt == config::Precision::BF16)
                                 << " cast=" << (cast == config::CastAt::Host ? "host" : "device")
                                 << " tail=" << tail);
                            Pair p = make_pair(c, l);
                            // inverse rollback is exact only without rollbacks
                            test::run_compare(*p.ref, *p.eng, l,
                                              tail ? std::vector<StepPlan>(3) : mixed_plan(), 1);
                            const offload::MemoryPlan& mp = p.eng->memory_plan();
                            size_t peak = p.eng->device().peak();
                            CHECK(peak == mp.total(offload::MemSide::Device));
                            CHECK(p.eng->device().used() == peak); // allocated once, up front
                            // the same plan from the deck alone
                            offload::MemoryPlan again = offload::make_memory_plan(
                                zero::sharded_plan_inputs(c, l, 1, false));
                            CHECK(again.total(offload::MemSide::Device) == peak);
                            CHECK(again.total(offload::MemSide::Pinned) ==
                                  mp.total(offload::MemSide::Pinned));
                            // `superoffload plan` on the host device: its engine figure is the
                            // engine's peak; the model's activations are in the arena too
                            plan::Plan pl = plan::make_plan(c, g, plan::default_host_profile());
                            CHECK(pl.mem.engine_device == static_cast<double>(peak));
                            CHECK(pl.mem.activations_on_device);
                            CHECK(pl.mem.total == pl.mem.engine_device + pl.mem.activations);
                        }
    CHECK(combos == 60);
}

TEST_CASE("memory plan: bf16 working weights (the CUDA bf16 model) allocate what the plan says") {
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow}) {
        config::Config c = test::base_deck();
        c.train.dtype = config::Precision::BF16;
        c.offload.weights = w;
        c.offload.schedule = config::Schedule::Interleaved;
        c.offload.interleave_k = 2;
        c.offload.bucket_mb = 0.05;
        Pair p = make_pair(c, l, true);
        test::run_compare(*p.ref, *p.eng, l, mixed_plan(), 1);
        CHECK(p.eng->device().peak() == p.eng->memory_plan().total(offload::MemSide::Device));
        offload::MemoryPlan again =
            offload::make_memory_plan(zero::sharded_plan_inputs(c, l, 1, true));
        // the planner's figure for a CUDA bf16 model (no device arena here: the engine alone)
        offload::MemoryPlan fp32w =
            offload::make_memory_plan(zero::sharded_plan_inputs(c, l, 1, false));
        if (w == config::WeightsPolicy::Stationary) // bf16 working weights: 2 bytes less a param
            CHECK(fp32w.total(offload::MemSide::Device, offload::MemKind::Weights) -
                      again.total(offload::MemSide::Device, offload::MemKind::Weights) ==
                  offload::mem_round(l.num_params * 4) - offload::mem_round(l.num_params * 2));
        CHECK(again.total(offload::MemSide::Device) == p.eng->device().peak());
        CHECK(again.total(offload::MemSide::Pinned) ==
              p.eng->memory_plan().total(offload::MemSide::Pinned));
    }
}

TEST_CASE("interleaved: state streams through two slots, not resident; trains where resident "
          "state does not fit") {
    model::ArchConfig g = test::tiny_gpt2();
    g.num_layers = 6;
    g.channels = 128; // ~1.5M params: 20+ buckets of one stat piece (65536 elements)
    model::ParamLayout l = model::make_layout(g);
    config::Config c = test::base_deck();
    c.offload.enabled = true;
    c.offload.schedule = config::Schedule::Interleaved;
    c.offload.interleave_k = 1; // every bucket stepped on the device
    c.offload.bucket_mb = 0.05;
    offload::MemoryPlan mp = offload::make_memory_plan(zero::sharded_plan_inputs(c, l, 1, false));
    double state = 12.0 * static_cast<double>(l.num_params); // fp32 params, m, v
    size_t slots = mp.total(offload::MemSide::Device, offload::MemKind::State);
    CHECK(static_cast<double>(slots) < state / 4); // two bucket-sized slots, not all the state
    // a device with room for the plan but not for the state of every bucket
    size_t need = mp.total(offload::MemSide::Device);
    CHECK(static_cast<double>(need) < state);
    c.device.memory_gb = static_cast<double>(need + 4096) / 1073741824.0;
    Pair p = make_pair(c, l);
    int nstream = 0;
    for (const offload::Bucket& b : p.eng->buckets())
        nstream += b.place == offload::Placement::Stream;
    CHECK(nstream == static_cast<int>(p.eng->buckets().size()));
    CHECK(nstream >= 20);
    std::vector<offload::StepReport> reps = test::run_compare(*p.ref, *p.eng, l, mixed_plan(), 1);
    // every streamed bucket: fp32 params + moments in and out once per applied step
    for (size_t s = 0; s < reps.size(); s++) {
        CAPTURE(s);
        int64_t expect = reps[s].skipped ? 0 : static_cast<int64_t>(l.num_params) * 12;
        CHECK(reps[s].bytes.state_h2d == expect);
        CHECK(reps[s].bytes.state_d2h == expect);
        CHECK(reps[s].bytes.grads_d2h == 0); // grads stay on the device
    }
    CHECK(p.eng->device().peak() <= need);
}

TEST_CASE("interleaved: static residents + streamed stride, bf16 cast host/device, STV on/off, "
          "exact/inverse: bitwise equal to plain") {
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    for (bool stv : {true, false})
        for (auto cast : {config::CastAt::Host, config::CastAt::Device})
            for (auto rb : {config::Rollback::Exact, config::Rollback::Inverse}) {
                if (rb == config::Rollback::Inverse && !stv) continue;
                CAPTURE(stv);
                CAPTURE(static_cast<int>(cast));
                CAPTURE(static_cast<int>(rb));
                config::Config c = test::base_deck();
                c.train.dtype = config::Precision::BF16;
                c.offload.schedule = config::Schedule::Interleaved;
                c.offload.interleave_k = 3;
                c.offload.gpu_tail_buckets = 1;
                c.offload.bucket_mb = 0.05;
                c.offload.stv = stv ? config::Stv::On : config::Stv::Off;
                c.offload.cast = cast;
                c.offload.rollback = rb;
                Pair p = make_pair(c, l);
                std::vector<StepPlan> plan(4); // no clip, no skip: exact even with inverse
                test::run_compare(*p.ref, *p.eng, l, plan, 1);
                CHECK(p.eng->stats().commits == 4);
            }
}

TEST_CASE("transfer bytes: grads cross the link in the precision offload.cast says") {
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    const int64_t n = static_cast<int64_t>(l.num_params);
    for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow})
        for (auto cast : {config::CastAt::Host, config::CastAt::Device}) {
            bool host = cast == config::CastAt::Host;
            bool flow = w == config::WeightsPolicy::Flow;
            CAPTURE(host);
            CAPTURE(flow);
            config::Config c = test::base_deck();
            c.train.dtype = config::Precision::BF16;
            c.offload.weights = w;
            c.offload.cast = cast;
            c.offload.bucket_mb = 0.05;
            Pair p = make_pair(c, l);
            std::vector<StepPlan> plan(3);
            plan[1].clip = 1.0f; // clipped: the host buckets re-run and publish again
            std::vector<offload::StepReport> reps = test::run_compare(*p.ref, *p.eng, l, plan, 1);
            REQUIRE(reps.size() == 3);
            CHECK(!reps[0].clipped);
            CHECK(reps[1].clipped);
            // weight flow: the backward writes fp32 grads into pinned host memory
            int64_t g = n * (host && !flow ? 2 : 4);
            for (const offload::StepReport& r : reps) {
                CHECK(r.bytes.grads_d2h == g);
                CHECK(r.bytes.state_h2d == 0);
            }
            if (!flow) { // working weights of every bucket H2D after its step, bf16 or fp32
                CHECK(reps[0].bytes.params_h2d == g);
                CHECK(reps[1].bytes.params_h2d == 2 * g); // speculative + clipped re-run
            } else { // the forward fetches every unit once, in the working precision on the link
                CHECK(reps[0].bytes.params_h2d >= n * (host ? 2 : 4));
                CHECK(reps[0].bytes.params_h2d % (host ? 2 : 4) == 0);
            }
            CHECK(p.eng->stats().bytes.grads_d2h == 3 * g);
        }
}

TEST_CASE("capacity: the plan fits exactly when the engine can allocate (interleaved decks)") {
    model::ArchConfig g = test::tiny_gpt2();
    model::ParamLayout l = model::make_layout(g);
    for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow})
        for (int k : {1, 3}) {
            CAPTURE(static_cast<int>(w));
            CAPTURE(k);
            config::Config c = test::base_deck();
            c.train.dtype = config::Precision::BF16;
            c.offload.enabled = true;
            c.offload.weights = w;
            c.offload.schedule = config::Schedule::Interleaved;
            c.offload.interleave_k = k;
            c.offload.bucket_mb = 0.05;
            plan::Plan big = plan::make_plan(c, g, plan::default_host_profile());
            double need = big.mem.total;
            for (double cap : {need, need - 256.0}) {
                CAPTURE(cap);
                c.device.memory_gb = (cap + 0.5) / 1073741824.0;
                plan::Plan p = plan::make_plan(c, g, plan::default_host_profile());
                // the engine's buffers and the model's activations on the same device
                auto model_on = [&](offload::Engine& e) {
                    model::ModelOptions o;
                    o.device = &e.device();
                    return std::make_unique<model::Transformer>(g, o, c.train.batch_size,
                                                                c.train.seq_len);
                };
                if (cap >= need) {
                    CHECK(p.fits);
                    Pair pr = make_pair(c, l);
                    test::run_compare(*pr.ref, *pr.eng, l, mixed_plan(), 1);
                    auto m = model_on(*pr.eng);
                    CHECK(static_cast<double>(pr.eng->device().peak()) == need);
                } else {
                    CHECK(!p.fits);
                    CHECK(p.why.find("device memory") != std::string::npos);
                    CHECK_THROWS_WITH_AS(
                        {
                            Pair pr = make_pair(c, l);
                            auto m = model_on(*pr.eng);
                        },
                        doctest::Contains("device memory exhausted"), core::Error);
                }
            }
        }
}

TEST_CASE("memory plan: host bytes per parameter (no whole-model bf16 or second grad copy)") {
    // a model large enough that per-bucket rings and statistics are small next to N
    model::ArchConfig g = test::tiny_gpt2();
    g.num_layers = 12;
    g.channels = 256;
    g.num_heads = 4;
    g.vocab_size = 4000;
    g.padded_vocab_size = 4096;
    model::ParamLayout l = model::make_layout(g);
    const double n = static_cast<double>(l.num_params);
    struct Case {
        const char* name;
        bool bf16, flow, cast_host, exact, state16;
        int accum;
        double bytes;     // expected host bytes per parameter
        bool q8 = false;  // q8 moments (1 byte + 4/256 each: the blocks' scales on top)
        bool p16 = false; // bf16 master params
    };
    const Case cases[] = {
        {"stationary bf16 cast host, inverse", true, false, true, false, false, 1, 14},
        {"stationary bf16 cast device, inverse", true, false, false, false, false, 1, 16},
        {"stationary fp32, inverse", false, false, false, false, false, 1, 16},
        {"stationary bf16 cast host, exact", true, false, true, true, false, 1, 26},
        {"stationary bf16 cast host, inverse, bf16 moments", true, false, true, false, true, 1, 10},
        {"flow bf16 cast host, grad ring, inverse", true, true, true, false, false, 1, 14},
        {"flow bf16 cast device, grad ring, inverse", true, true, false, false, false, 1, 16},
        {"flow bf16 cast host, accumulation, inverse", true, true, true, false, false, 2, 16},
        {"flow bf16 cast host, grad ring, inverse, bf16 moments", true, true, true, false, true, 1,
         10},
        {"flow bf16 cast host, accumulation, exact, bf16 moments", true, true, true, true, true, 2,
         20},
        // q8 moments: 1 + 4/256 B each; bf16 master 2 B: the 70B-on-one-GH200 formats
        {"flow bf16 cast host, grad ring, exact, q8", true, true, true, true, false, 1,
         2 + 2 * (4 + 2 * (1 + 4.0 / 256)), true},
        {"flow bf16 cast host, grad ring, exact, q8, bf16 master", true, true, true, true, false, 1,
         2 + 2 * (2 + 2 * (1 + 4.0 / 256)), true, true},
        {"stationary bf16 cast host, exact, bf16 master", true, false, true, true, false, 1,
         2 + 2 * (2 + 8), false, true},
    };
    for (const Case& k : cases) {
        CAPTURE(k.name);
        config::Config c = test::base_deck();
        c.offload.enabled = true;
        c.offload.bucket_mb = 1.0;
        c.train.dtype = k.bf16 ? config::Precision::BF16 : config::Precision::FP32;
        c.offload.weights =
            k.flow ? config::WeightsPolicy::Flow : config::WeightsPolicy::Stationary;
        c.offload.cast = k.cast_host ? config::CastAt::Host : config::CastAt::Device;
        c.offload.rollback = k.exact ? config::Rollback::Exact : config::Rollback::Inverse;
        c.optimizer.state_dtype = k.state16 ? config::StateDtype::BF16 : config::StateDtype::FP32;
        if (k.q8) c.optimizer.state_dtype = config::StateDtype::Q8;
        if (k.p16) c.optimizer.master_dtype = config::MasterDtype::BF16;
        c.train.grad_accum = k.accum;
        offload::MemoryPlanInputs in = zero::sharded_plan_inputs(c, l, 1, false);
        CHECK((k.flow && k.accum == 1) == (offload::grad_ring_slots(in) > 0));
        offload::MemoryPlan mp = offload::make_memory_plan(in);
        double host = static_cast<double>(mp.total(offload::MemSide::Pinned) +
                                          mp.total(offload::MemSide::Host));
        MESSAGE(std::string(k.name) << ": " << host / n << " B/param of host memory");
        CHECK(host >= k.bytes * n);
        // + two 1 MiB bf16 ring slots, the statistics, the q8 blocks' short last blocks and
        // the codes' alignment
        CHECK(host <= k.bytes * n + 2.2e6 + (k.q8 ? 4 * 4.0 * 8 * l.tensors.size() : 0.0));
        for (const offload::BufferSpec& b : mp.buffers) // no whole-model bf16 buffer but grads
            if (b.side != offload::MemSide::Device && b.bytes >= 2 * l.num_params &&
                b.bytes < 4 * l.num_params)
                CHECK((b.id == offload::Buf::HostGrads16 || b.id == offload::Buf::HostExpAvg ||
                       b.id == offload::Buf::HostExpAvgSq || b.id == offload::Buf::HostParams));
    }
}
