// The engine under the real CPU models (GPT-2 and the LLaMA family, through WeightSource/GradSink):
// bitwise equal to the plain path with clipping and a non-finite skip, stationary and bf16 flow.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>

#include "core/trace.h"
#include "engine_test_util.h"
#include "offload/engine.h"

using namespace sof;

namespace {

const core::Log kQuiet(0, core::LogLevel::Quiet);

// The LLaMA family through the same engine: the engine sees units and buckets, not architectures.
model::ArchConfig tiny_llama(model::Arch arch) {
    model::ArchConfig g = test::tiny_gpt2();
    g.arch = arch;
    model::apply_arch_defaults(&g);
    g.num_heads = 4;
    g.num_kv_heads = 2;
    g.intermediate_size = 160;
    g.tie_embeddings = arch == model::Arch::Qwen2;
    if (arch == model::Arch::Qwen3) g.head_dim = 24;
    return g;
}

void run_gpt2(const config::Config& ecfg, int accum, core::Trace* trace,
              const model::ArchConfig& g = test::tiny_gpt2()) {
    const int B = 2, T = 16;
    std::unique_ptr<model::Model> model = model::make_model(g, model::ModelOptions{}, B, T);
    model::Model& net = *model;
    const model::ParamLayout& l = net.layout();
    config::Config rc = ecfg;
    rc.offload.enabled = false;
    config::Config ec = ecfg;
    ec.offload.enabled = true;
    auto ref = offload::make_updater(rc, l, kQuiet, nullptr);
    auto eng = offload::make_updater(ec, l, kQuiet, trace);
    std::vector<float> p(l.num_params), z(l.num_params, 0.0f);
    model::init_params(l, p.data(), 0.02f, 5);
    ref->set_state(p.data(), z.data(), z.data(), 0);
    eng->set_state(p.data(), z.data(), z.data(), 0);
    std::vector<int> in(B * T), tg(B * T);
    for (int s = 0; s < 4; s++) {
        offload::StepHparams hp;
        hp.step = s;
        hp.lr = 3e-3f;
        hp.grad_clip = s == 1 ? 0.05f : 100.0f;
        hp.inject_nonfinite = s == 2;
        float loss[2] = {0, 0};
        offload::StepReport rep[2];
        for (int k = 0; k < 2; k++) {
            offload::Updater& u = k == 0 ? *ref : *eng;
            u.begin_step(hp);
            for (int m = 0; m < accum; m++) {
                for (int i = 0; i < B * T; i++) {
                    in[i] = static_cast<int>(test::hash32(s * 7919 + m * 131 + i) % 2300);
                    tg[i] = static_cast<int>(test::hash32(s * 7919 + m * 131 + i + 1) % 2300);
                }
                loss[k] += net.forward(u.weights(), in.data(), tg.data(), B, T);
                u.begin_micro(m, m == accum - 1);
                net.backward(u.weights(), u.grads(), 1.0f / (B * T * accum));
            }
            rep[k] = u.finish_step();
        }
        INFO("step " << s);
        CHECK(loss[0] == loss[1]);
        CHECK(rep[0].skipped == rep[1].skipped);
        CHECK(rep[0].clipped == rep[1].clipped);
        CHECK(rep[1].skipped == (s == 2));
        CHECK(rep[1].clipped == (s == 1));
    }
    test::State a = test::state_of(*ref, l.num_params), b = test::state_of(*eng, l.num_params);
    CHECK(a.t == 3);
    CHECK(b.t == 3);
    CHECK(test::bitwise_equal(a.p, b.p));
    CHECK(test::bitwise_equal(a.m, b.m));
    CHECK(test::bitwise_equal(a.v, b.v));
    CHECK(eng->stats().skips == 1);
    CHECK(eng->stats().rollbacks == 2);
}

} // namespace

TEST_CASE("GPT-2: engine == plain bitwise, fp32 stationary, tail 1") {
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.1;
    c.offload.gpu_tail_buckets = 1;
    run_gpt2(c, 1, nullptr);
}

TEST_CASE("GPT-2: engine == plain bitwise, bf16 weight flow, accumulation 2, trace spans") {
    config::Config c = test::base_deck();
    c.train.dtype = config::Precision::BF16;
    c.offload.bucket_mb = 0.1;
    c.offload.weights = config::WeightsPolicy::Flow;
    c.offload.cast = config::CastAt::Host;
    core::Trace trace;
    run_gpt2(c, 2, &trace);
    std::vector<std::string> lanes = trace.lane_names();
    std::set<std::string> ls(lanes.begin(), lanes.end());
    CHECK(ls.count("cpu optimizer") == 1);
    CHECK(ls.count("stream d2h") == 1);
    CHECK(ls.count("stream weight fetch") == 1);
    CHECK(trace.num_events() > 20);
}

TEST_CASE("LLaMA family: engine == plain bitwise (llama untied GQA flow bf16, qwen2 tied, qwen3)") {
    config::Config c = test::base_deck();
    c.offload.bucket_mb = 0.1;
    c.offload.gpu_tail_buckets = 1;
    run_gpt2(c, 1, nullptr, tiny_llama(model::Arch::Qwen2));
    run_gpt2(c, 1, nullptr, tiny_llama(model::Arch::Qwen3));
    c.train.dtype = config::Precision::BF16;
    c.offload.weights = config::WeightsPolicy::Flow;
    c.offload.cast = config::CastAt::Host;
    run_gpt2(c, 2, nullptr, tiny_llama(model::Arch::Llama));
}
