// SuperOffload engine vs the plain path: bitwise equal params, moments and step counts over steps
// with no clipping, clipping, and non-finite skips, for bucket sizes, tails, casts, weight flow,
// schedules and gradient accumulation; bucket formation; state round trip; deck errors.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/dtype.h"
#include "core/error.h"
#include "engine_test_util.h"
#include "offload/buckets.h"
#include "offload/common.h"
#include "offload/engine.h"
#include "offload/memory_plan.h"
#include "zero/memory.h"

using namespace sof;
using sof::test::StepPlan;

namespace {

const core::Log kQuiet(0, core::LogLevel::Quiet);

std::vector<StepPlan> mixed_plan() {
    std::vector<StepPlan> p(6);
    p[0].clip = 100.0f;                // clip set, not hit
    p[1].clip = 1.0f;                  // hit (norm ~3)
    p[2].nan = true;                   // skip
    p[3].amp = 0.02f;                  // no clip at all
    p[4].clip = 1.0f, p[4].nan = true; // skip wins over clip
    p[5].clip = 100.0f;
    return p;
}

struct Pair {
    std::unique_ptr<offload::Updater> ref, eng;
};

// bf16w: the engine keeps bf16 working weights (what the CUDA bf16 model reads; bf16 decks only).
Pair make_pair(const config::Config& eng_cfg, const model::ParamLayout& l, bool bf16w = false) {
    config::Config rc = eng_cfg;
    rc.offload.enabled = false;
    config::Config ec = eng_cfg;
    ec.offload.enabled = true;
    Pair p;
    p.ref = offload::make_updater(rc, l, kQuiet, nullptr);
    if (bf16w)
        p.eng = std::make_unique<offload::Engine>(ec, l, kQuiet, nullptr, true);
    else
        p.eng = offload::make_updater(ec, l, kQuiet, nullptr);
    test::init_state(*p.ref, l);
    test::init_state(*p.eng, l);
    return p;
}

// Runs mixed_plan on plain vs engine; checks counters.
void check_config(const config::Config& cfg, int accum = 1, bool bf16w = false,
                  const model::ArchConfig& arch = test::tiny_gpt2()) {
    model::ParamLayout l = model::make_layout(arch);
    Pair p = make_pair(cfg, l, bf16w);
    CHECK(p.eng->bf16_weights() == bf16w);
    std::vector<StepPlan> plan = mixed_plan();
    std::vector<offload::StepReport> reps = test::run_compare(*p.ref, *p.eng, l, plan, accum);
    REQUIRE(reps.size() == plan.size());
    CHECK(reps[1].clipped);
    CHECK(reps[2].skipped);
    CHECK(reps[4].skipped);
    CHECK(!reps[0].clipped);
    CHECK(p.ref->stats().skips == 2);
    CHECK(p.eng->stats().skips == 2);
    auto* e = dynamic_cast<offload::Engine*>(p.eng.get());
    REQUIRE(e);
    int ring = 0; // grad ring slots the engine allocated
    for (const offload::BufferSpec& b : e->memory_plan().buffers)
        ring += b.id == offload::Buf::DevGradRing;
    CHECK(ring == offload::grad_ring_slots(zero::sharded_plan_inputs(
                      [&] {
                          config::Config ec = cfg;
                          ec.offload.enabled = true;
                          return ec;
                      }(),
                      l, 1, bf16w)));
    int nhost = 0;
    for (const offload::Bucket& b : e->buckets())
        nhost += b.place == offload::Placement::Host;
    bool spec = cfg.offload.stv != config::Stv::Off &&
                cfg.offload.schedule != config::Schedule::Synchronous;
    if (spec && nhost > 0) {
        CHECK(reps[1].rolled_back);
        CHECK(reps[2].rolled_back);
        CHECK(!reps[0].rolled_back);
        CHECK(p.eng->stats().rollbacks == 3); // steps 1 (clip), 2 and 4 (skip)
        CHECK(p.eng->stats().reruns == nhost);
    } else {
        CHECK(p.eng->stats().rollbacks == 0);
        CHECK(p.eng->stats().reruns == 0);
    }
}

} // namespace

TEST_CASE("buckets: piece-aligned cover in backward order, tensors split, tail placement") {
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    std::vector<int64_t> pieces = offload::stat_pieces(l);
    for (size_t elems : {size_t(1), size_t(5000), size_t(70000), size_t(1) << 30}) {
        std::vector<offload::Bucket> bs = offload::make_buckets(l, pieces, elems);
        REQUIRE(!bs.empty());
        CHECK(bs.front().end == l.num_params);
        CHECK(bs.back().begin == 0);
        for (size_t i = 0; i < bs.size(); i++) {
            const offload::Bucket& b = bs[i];
            CHECK(b.index == static_cast<int>(i));
            if (i + 1 < bs.size()) {
                CHECK(bs[i + 1].end == b.begin);
                CHECK(b.numel() >= std::min(elems, size_t(1) << 16)); // target, or one piece
                CHECK(bs[i + 1].ready_unit <= b.ready_unit);
            }
            size_t sum = 0;
            for (const offload::BucketSlice& s : b.slices)
                sum += s.n;
            CHECK(sum == b.numel());
            CHECK(pieces[static_cast<size_t>(b.piece_begin)] == static_cast<int64_t>(b.begin));
            CHECK(pieces[static_cast<size_t>(b.piece_end)] == static_cast<int64_t>(b.end));
        }
        if (elems == 1) { // one piece per bucket: wte (3 pieces) is split over 3 buckets
            CHECK(bs.size() == pieces.size() - 1);
            int wte_buckets = 0;
            for (const offload::Bucket& b : bs)
                wte_buckets += b.end <= l.tensors[0].numel ? 1 : 0;
            CHECK(wte_buckets == 3);
        }
        if (elems == (size_t(1) << 30)) CHECK(bs.size() == 1);
    }
    std::vector<offload::Bucket> bs = offload::make_buckets(l, pieces, 5000);
    offload::place_buckets(bs, 2, 0);
    int nb = static_cast<int>(bs.size());
    for (const offload::Bucket& b : bs)
        CHECK((b.place == offload::Placement::Device) == (b.index >= nb - 2));
    offload::place_buckets(bs, 0, 3); // DOS Algorithm 1: (i + 1) % k == 0 streamed
    for (const offload::Bucket& b : bs)
        CHECK((b.place == offload::Placement::Stream) == (b.index % 3 == 2));
    offload::place_buckets(bs, 1, 2); // static residents first, then the stride over the others
    for (const offload::Bucket& b : bs) {
        if (b.index == nb - 1)
            CHECK(b.place == offload::Placement::Device);
        else
            CHECK((b.place == offload::Placement::Stream) == (b.index % 2 == 1));
    }
    offload::place_buckets(bs, 1000, 0);
    for (const offload::Bucket& b : bs)
        CHECK(b.place == offload::Placement::Device);
}

TEST_CASE("engine == plain bitwise (fp32): bucket sizes x tail buckets") {
    for (double mb : {0.001, 0.05, 0.3, 64.0})
        for (int tail : {0, 1, 1000}) {
            CAPTURE(mb);
            CAPTURE(tail);
            config::Config c = test::base_deck();
            c.offload.bucket_mb = mb;
            c.offload.gpu_tail_buckets = tail;
            check_config(c);
        }
}

TEST_CASE("engine == plain bitwise: bf16 weights, cast on host/device, stationary/flow") {
    for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow})
        for (auto cast : {config::CastAt::Host, config::CastAt::Device})
            for (int tail : {0, 1}) {
                CAPTURE(static_cast<int>(w));
                CAPTURE(static_cast<int>(cast));
                CAPTURE(tail);
                config::Config c = test::base_deck();
                c.train.dtype = config::Precision::BF16;
                c.offload.bucket_mb = 0.05;
                c.offload.weights = w;
                c.offload.cast = cast;
                c.offload.gpu_tail_buckets = tail;
                check_config(c);
            }
}

TEST_CASE("engine == plain bitwise: weight flow fp32, prefetch 0/1/3") {
    for (int pf : {0, 1, 3}) {
        CAPTURE(pf);
        config::Config c = test::base_deck();
        c.offload.bucket_mb = 0.3;
        c.offload.weights = config::WeightsPolicy::Flow;
        c.offload.prefetch_layers = pf;
        c.offload.gpu_tail_buckets = 1;
        check_config(c);
    }
}

TEST_CASE("engine == plain bitwise: schedules synchronous, interleaved, STV off; accumulation 2") {
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.05;
    SUBCASE("synchronous") {
        c.offload.schedule = config::Schedule::Synchronous;
    }
    SUBCASE("interleaved k=2") {
        c.offload.schedule = config::Schedule::Interleaved;
        c.offload.interleave_k = 2;
    }
    SUBCASE("interleaved k=1 (everything on the device)") {
        c.offload.schedule = config::Schedule::Interleaved;
        c.offload.interleave_k = 1;
    }
    SUBCASE("stv off") {
        c.offload.stv = config::Stv::Off;
    }
    SUBCASE("accumulation 2") {
        c.offload.gpu_tail_buckets = 1;
        check_config(c, 2);
        return;
    }
    check_config(c);
}

TEST_CASE("engine == plain bitwise: bf16 moments (optimizer.state_dtype bf16) in every placement") {
    // host buckets (cpu step), device-resident tail, streamed (interleaved) buckets, stationary
    // and flow, cast host and device, exact and inverse-free paths: m, v of 2 bytes everywhere
    struct V {
        const char* name;
        config::WeightsPolicy w;
        config::CastAt cast;
        int tail;
        bool interleaved;
    };
    for (const V& v :
         {V{"stationary cast host tail 1", config::WeightsPolicy::Stationary, config::CastAt::Host,
            1, false},
          V{"flow cast host tail 1", config::WeightsPolicy::Flow, config::CastAt::Host, 1, false},
          V{"flow cast device tail 0", config::WeightsPolicy::Flow, config::CastAt::Device, 0,
            false},
          V{"stationary interleaved k=2 tail 1", config::WeightsPolicy::Stationary,
            config::CastAt::Device, 1, true}}) {
        CAPTURE(v.name);
        config::Config c = test::base_deck();
        c.train.dtype = config::Precision::BF16;
        c.optimizer.state_dtype = config::StateDtype::BF16;
        c.offload.bucket_mb = 0.05;
        c.offload.weights = v.w;
        c.offload.cast = v.cast;
        c.offload.gpu_tail_buckets = v.tail;
        if (v.interleaved) {
            c.offload.schedule = config::Schedule::Interleaved;
            c.offload.interleave_k = 2;
        }
        check_config(c);
    }
}

TEST_CASE("engine == plain bitwise: weight flow's grad ring (no accumulation), fp32 or bf16 "
          "weights") {
    // 8 layers: the ring (unit 0's slot + the units buckets still need) is smaller than the
    // model, so the model's fp32 grads live in device ring slots, not a whole-model buffer
    model::ArchConfig g = test::tiny_gpt2();
    g.num_layers = 8;
    g.vocab_size = 250;
    g.padded_vocab_size = 256;
    model::ParamLayout l = model::make_layout(g);
    int combos = 0;
    for (auto dt : {config::Precision::FP32, config::Precision::BF16})
        for (auto cast : {config::CastAt::Host, config::CastAt::Device})
            for (int tail : {0, 1})
                for (double mb : {0.001, 0.3})
                    for (bool w16 : {false, true}) {
                        if (dt == config::Precision::FP32 && cast == config::CastAt::Host) continue;
                        if (dt == config::Precision::FP32 && w16) continue;
                        if (!test::sweep_runs(combos++)) continue;
                        CAPTURE(static_cast<int>(dt));
                        CAPTURE(static_cast<int>(cast));
                        CAPTURE(tail);
                        CAPTURE(mb);
                        CAPTURE(w16);
                        config::Config c = test::base_deck();
                        c.train.dtype = dt;
                        c.offload.weights = config::WeightsPolicy::Flow;
                        c.offload.cast = cast;
                        c.offload.gpu_tail_buckets = tail;
                        c.offload.bucket_mb = mb;
                        c.offload.enabled = true;
                        offload::MemoryPlanInputs in = zero::sharded_plan_inputs(c, l, 1, w16);
                        int slots = offload::grad_ring_slots(in);
                        CHECK(slots >= 2);
                        MESSAGE("grad ring: " << slots << " slots of " << in.max_unit
                                              << " params for " << l.num_params);
                        CHECK(static_cast<size_t>(slots) * in.max_unit < l.num_params);
                        offload::MemoryPlan mp = offload::make_memory_plan(in);
                        for (const offload::BufferSpec& b : mp.buffers)
                            CHECK(b.id != offload::Buf::DevGrads); // no whole-model grads
                        check_config(c, 1, w16, g);
                    }
    CHECK(combos == 20);
    // with accumulation the model's grads accumulate in one pinned buffer: no ring
    config::Config c = test::base_deck();
    c.offload.weights = config::WeightsPolicy::Flow;
    c.offload.enabled = true;
    c.train.grad_accum = 2;
    CHECK(offload::grad_ring_slots(zero::sharded_plan_inputs(c, l, 1, false)) == 0);
    check_config(c, 2, false, g);
}

TEST_CASE("engine == plain bitwise: q8 moments and bf16 master params (stochastic rounding)") {
    // issue 28's formats through every placement: host buckets (exact rollback of speculative
    // steps restores the saved codes and scales), device tail buckets, weight flow (the bf16
    // master crosses the link as it is) and the interleaved schedule's streamed buckets. The
    // quantization blocks start at every tensor's first element and the stochastic rounding
    // draws from each element's flat number, so the engine's bucket slices step exactly what the
    // plain path's whole tensors do.
    struct V {
        const char* name;
        config::WeightsPolicy w;
        int tail;
        bool interleaved, q8, p16;
    };
    for (const V& v :
         {V{"stationary tail 1, q8", config::WeightsPolicy::Stationary, 1, false, true, false},
          V{"stationary tail 1, q8 + bf16 master", config::WeightsPolicy::Stationary, 1, false,
            true, true},
          V{"flow tail 0, bf16 master", config::WeightsPolicy::Flow, 0, false, false, true},
          V{"flow tail 1, q8 + bf16 master", config::WeightsPolicy::Flow, 1, false, true, true},
          V{"interleaved k=2 tail 1, q8 + bf16 master", config::WeightsPolicy::Stationary, 1, true,
            true, true}}) {
        CAPTURE(v.name);
        config::Config c = test::base_deck();
        c.train.dtype = config::Precision::BF16;
        c.offload.cast = config::CastAt::Host;
        if (v.q8) c.optimizer.state_dtype = config::StateDtype::Q8;
        c.optimizer.state_block = 64;
        if (v.p16) c.optimizer.master_dtype = config::MasterDtype::BF16;
        c.offload.bucket_mb = 0.05;
        c.offload.weights = v.w;
        c.offload.gpu_tail_buckets = v.tail;
        if (v.interleaved) {
            c.offload.schedule = config::Schedule::Interleaved;
            c.offload.interleave_k = 2;
        }
        check_config(c);
    }
    // the inverse rollback cannot undo them: refused with the key
    config::Config c = test::base_deck();
    c.train.dtype = config::Precision::BF16;
    c.optimizer.state_dtype = config::StateDtype::Q8;
    c.offload.rollback = config::Rollback::Inverse;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    CHECK_THROWS_WITH_AS(offload::Engine(c, l, kQuiet, nullptr),
                         doctest::Contains("offload.rollback: exact"), core::Error);
    c.offload.rollback = config::Rollback::Exact;
    c.optimizer.master_dtype = config::MasterDtype::BF16;
    c.train.dtype = config::Precision::FP32;
    CHECK_THROWS_WITH_AS(offload::Engine(c, l, kQuiet, nullptr),
                         doctest::Contains("train.dtype: bf16"), core::Error);
}

TEST_CASE("engine: q8 + bf16 master get_native/set_native and get_state/set_state round trips") {
    config::Config c = test::base_deck();
    c.train.dtype = config::Precision::BF16;
    c.offload.bucket_mb = 0.05;
    c.offload.gpu_tail_buckets = 2;
    c.optimizer.state_dtype = config::StateDtype::Q8;
    c.optimizer.master_dtype = config::MasterDtype::BF16;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    Pair p = make_pair(c, l);
    size_t n = l.num_params;
    std::vector<float> pp(n), m(n), v(n);
    for (size_t i = 0; i < n; i++) {
        pp[i] = test::noise(1, 2, i);
        m[i] = 1e-3f * test::noise(3, 4, i);
        v[i] = 1e-6f * (1.0f + test::noise(5, 6, i));
    }
    p.eng->set_state(pp.data(), m.data(), v.data(), 41);
    p.ref->set_state(pp.data(), m.data(), v.data(), 41);
    offload::NativeState a, b;
    p.eng->get_native(&a);
    p.ref->get_native(&b);
    CHECK(a.params == b.params); // device and host buckets hold what the plain path holds
    CHECK(a.slot[0] == b.slot[0]);
    CHECK(a.slot[1] == b.slot[1]);
    CHECK(a.opt_step == 41);
    // the values: bf16 params, q8 moments within one code step (~6% of a value, 3% rounding)
    test::State s = test::state_of(*p.eng, n);
    int64_t far = 0;
    for (size_t i = 0; i < n; i++) {
        if (s.p[i] != core::bf16_to_f32(core::f32_to_bf16(pp[i]))) far++;
        if (std::fabs(s.m[i] - m[i]) > 0.07f * std::fabs(m[i]) + 1e-9f) far++;
        if (std::fabs(s.v[i] - v[i]) > 0.07f * std::fabs(v[i]) + 1e-12f) far++;
    }
    CHECK(far == 0);
    // set_native of the exported bytes gives them back
    p.eng->set_native(a);
    offload::NativeState a2;
    p.eng->get_native(&a2);
    CHECK(a2.params == a.params);
    CHECK(a2.slot[0] == a.slot[0]);
    test::run_compare(*p.ref, *p.eng, l, mixed_plan(), 1);
}

TEST_CASE("engine: bf16 moments get_state/set_state round trip on host and device buckets") {
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.05;
    c.offload.gpu_tail_buckets = 2;
    c.optimizer.state_dtype = config::StateDtype::BF16;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    Pair p = make_pair(c, l);
    size_t n = l.num_params;
    std::vector<float> pp(n), m(n), v(n), m16(n), v16(n);
    for (size_t i = 0; i < n; i++) {
        pp[i] = test::noise(1, 2, i);
        m[i] = 1e-3f * test::noise(3, 4, i);
        v[i] = 1e-6f * (1.0f + test::noise(5, 6, i));
        m16[i] = core::bf16_to_f32(core::f32_to_bf16(m[i])); // what bf16 moments hold
        v16[i] = core::bf16_to_f32(core::f32_to_bf16(v[i]));
    }
    p.eng->set_state(pp.data(), m.data(), v.data(), 41);
    p.ref->set_state(pp.data(), m.data(), v.data(), 41);
    test::State s = test::state_of(*p.eng, n);
    CHECK(test::bitwise_equal(s.p, pp));
    CHECK(test::bitwise_equal(s.m, m16));
    CHECK(test::bitwise_equal(s.v, v16));
    test::run_compare(*p.ref, *p.eng, l, mixed_plan(), 1);
}

TEST_CASE("engine: stv auto pauses speculation while clipping is frequent, bitwise throughout") {
    // 10 clipped steps (warm-up), then 10 unclipped: speculation rolls back the first 4, pauses
    // (4 of the last 8 steps clipped) and resumes at step 15, once at most 3 of the last 8 were
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.05;
    c.offload.stv = config::Stv::Auto;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    Pair p = make_pair(c, l);
    std::vector<StepPlan> plan(20);
    for (int s = 0; s < 20; s++)
        plan[static_cast<size_t>(s)].clip = s < 10 ? 1.0f : 100.0f;
    std::vector<offload::StepReport> reps = test::run_compare(*p.ref, *p.eng, l, plan, 1);
    for (int s = 0; s < 20; s++) {
        CAPTURE(s);
        CHECK(reps[static_cast<size_t>(s)].clipped == (s < 10));
        CHECK(reps[static_cast<size_t>(s)].rolled_back == (s < 4));
    }
    CHECK(p.eng->stats().rollbacks == 4);
    // speculation resumed: the last steps' commits are deferred (their host steps were queued
    // during backward); the state is still the plain path's, bitwise
    test::State a = test::state_of(*p.ref, l.num_params), b = test::state_of(*p.eng, l.num_params);
    CHECK(test::bitwise_equal(a.p, b.p));
    CHECK(test::bitwise_equal(a.m, b.m));
    CHECK(test::bitwise_equal(a.v, b.v));
}

TEST_CASE("engine: inverse rollback stays close to the exact path") {
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.05;
    c.offload.rollback = config::Rollback::Inverse;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    Pair p = make_pair(c, l);
    std::vector<float> seen;
    int64_t step = 0;
    for (const StepPlan& sp : mixed_plan()) {
        offload::StepHparams hp;
        hp.step = step++;
        hp.lr = 1e-2f;
        hp.grad_clip = sp.clip;
        hp.inject_nonfinite = sp.nan;
        for (offload::Updater* u : {p.ref.get(), p.eng.get()}) {
            u->begin_step(hp);
            u->begin_micro(0, true);
            test::fake_fwd_bwd(l, *u, hp.step, 0, sp.amp, seen);
            u->finish_step();
        }
    }
    test::State a = test::state_of(*p.ref, l.num_params), b = test::state_of(*p.eng, l.num_params);
    CHECK(a.t == b.t);
    double maxd = 0;
    for (size_t i = 0; i < a.p.size(); i++)
        maxd = std::max(maxd, double(std::fabs(a.p[i] - b.p[i])));
    CHECK(maxd < 1e-5);
    CHECK(p.eng->stats().rollbacks == 3);
}

TEST_CASE("engine: get_state/set_state round trip, then steps match plain from that state") {
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.05;
    c.offload.gpu_tail_buckets = 2;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    Pair p = make_pair(c, l);
    size_t n = l.num_params;
    std::vector<float> pp(n), m(n), v(n);
    for (size_t i = 0; i < n; i++) {
        pp[i] = test::noise(1, 2, i);
        m[i] = 1e-3f * test::noise(3, 4, i);
        v[i] = 1e-6f * (1.0f + test::noise(5, 6, i));
    }
    p.eng->set_state(pp.data(), m.data(), v.data(), 41);
    p.ref->set_state(pp.data(), m.data(), v.data(), 41);
    test::State s = test::state_of(*p.eng, n);
    CHECK(s.t == 41);
    CHECK(test::bitwise_equal(s.p, pp));
    CHECK(test::bitwise_equal(s.m, m));
    CHECK(test::bitwise_equal(s.v, v));
    test::run_compare(*p.ref, *p.eng, l, mixed_plan(), 1);
}

TEST_CASE("engine: deck errors name the key") {
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    config::Config c = test::base_deck();
    c.offload.enabled = true;
    c.offload.schedule = config::Schedule::Interleaved;
    c.offload.interleave_k = 0;
    try {
        offload::make_updater(c, l, kQuiet, nullptr);
        FAIL("expected a Config error");
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        CHECK(std::string(e.what()).find("offload.interleave_k") != std::string::npos);
    }
    c = test::base_deck();
    c.offload.enabled = true;
    c.offload.bucket_mb = 0.0;
    CHECK_THROWS_WITH_AS(offload::make_updater(c, l, kQuiet, nullptr),
                         doctest::Contains("offload.bucket_mb"), core::Error);
    c = test::base_deck();
    c.offload.enabled = true;
    c.device.memory_gb = 0.0005; // 512 KiB: the fp32 grads alone (1 MiB) do not fit
    CHECK_THROWS_WITH_AS(offload::make_updater(c, l, kQuiet, nullptr),
                         doctest::Contains("device.memory_gb"), core::Error);
}

TEST_CASE("engine: deferred commit, the next forward waits for slow speculative steps") {
    for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow}) {
        CAPTURE(static_cast<int>(w));
        config::Config c = test::base_deck();
        c.train.dtype = config::Precision::BF16;
        c.offload.bucket_mb = 0.05;
        c.offload.gpu_tail_buckets = 1;
        c.offload.weights = w;
        model::ParamLayout l = model::make_layout(test::tiny_gpt2());
        Pair p = make_pair(c, l);
        auto* e = dynamic_cast<offload::Engine*>(p.eng.get());
        REQUIRE(e);
        std::vector<StepPlan> plan(4);
        // The worker sleeps before every speculative step of the step: finish_step commits and
        // returns while the host buckets are still being stepped.
        test::run_compare(*p.ref, *p.eng, l, plan, 1, [e] {
            e->worker().push([] { std::this_thread::sleep_for(std::chrono::milliseconds(60)); });
        });
        CHECK(p.eng->stats().rollbacks == 0);
    }
}

TEST_CASE("engine == plain bitwise with bf16 working weights (what the CUDA bf16 model reads)") {
    // The engine stores the working weights as bf16 (stationary: dwork16, flow: the bf16 slots);
    // widened they must be the plain path's bf16 values held in fp32, bit for bit.
    config::Config c = test::base_deck();
    c.train.dtype = config::Precision::BF16;
    c.offload.bucket_mb = 0.05;
    int accum = 1;
    SUBCASE("stationary cast host tail 0") {
        c.offload.cast = config::CastAt::Host;
    }
    SUBCASE("stationary cast host tail 1, accumulation 2") {
        c.offload.cast = config::CastAt::Host;
        c.offload.gpu_tail_buckets = 1;
        accum = 2;
    }
    SUBCASE("stationary cast device tail 1") {
        c.offload.cast = config::CastAt::Device;
        c.offload.gpu_tail_buckets = 1;
    }
    SUBCASE("stationary cast device, interleaved k=2") {
        c.offload.cast = config::CastAt::Device;
        c.offload.schedule = config::Schedule::Interleaved;
        c.offload.interleave_k = 2;
    }
    SUBCASE("flow cast host tail 1") {
        c.offload.cast = config::CastAt::Host;
        c.offload.weights = config::WeightsPolicy::Flow;
        c.offload.gpu_tail_buckets = 1;
    }
    SUBCASE("flow cast device, interleaved k=2") {
        c.offload.cast = config::CastAt::Device;
        c.offload.weights = config::WeightsPolicy::Flow;
        c.offload.schedule = config::Schedule::Interleaved;
        c.offload.interleave_k = 2;
    }
    check_config(c, accum, true);
    // half the working-weight bytes of the fp32-held engine
    config::Config ec = c;
    ec.offload.enabled = true;
    model::ParamLayout l = model::make_layout(test::tiny_gpt2());
    offload::Engine e16(ec, l, kQuiet, nullptr, true), e32(ec, l, kQuiet, nullptr, false);
    auto weight_bytes = [](const offload::Engine& e) {
        size_t b = 0;
        for (const offload::BufferSpec& s : e.memory_plan().buffers)
            if (s.kind == offload::MemKind::Weights && s.side == offload::MemSide::Device &&
                (s.id == offload::Buf::DevWork))
                b += s.bytes;
        return b;
    };
    if (c.offload.weights == config::WeightsPolicy::Stationary)
        CHECK(2 * weight_bytes(e16) == weight_bytes(e32));
}

TEST_CASE("engine (bf16 weights): deferred commit waits before the next forward reads them") {
    for (auto w : {config::WeightsPolicy::Stationary, config::WeightsPolicy::Flow}) {
        CAPTURE(static_cast<int>(w));
        config::Config c = test::base_deck();
        c.train.dtype = config::Precision::BF16;
        c.offload.cast = config::CastAt::Host;
        c.offload.bucket_mb = 0.05;
        c.offload.gpu_tail_buckets = 1;
        c.offload.weights = w;
        model::ParamLayout l = model::make_layout(test::tiny_gpt2());
        Pair p = make_pair(c, l, true);
        auto* e = dynamic_cast<offload::Engine*>(p.eng.get());
        REQUIRE(e);
        test::run_compare(*p.ref, *p.eng, l, std::vector<StepPlan>(3), 1, [e] {
            e->worker().push([] { std::this_thread::sleep_for(std::chrono::milliseconds(60)); });
        });
    }
}
