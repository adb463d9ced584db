// Helpers of the engine tests: a deck for a tiny GPT-2 layout, a fake model that drives an Updater
// exactly like GPT2 does (acquire/release order, unit_done order) with grads that depend on the
// working weights it was given, and a runner comparing two updaters bitwise step by step.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "config/config.h"
#include "core/dtype.h"
#include "core/log.h"
#include "device/device.h"
#include "model/transformer.h"
#include "offload/updater.h"
#include "offload/updater_factory.h"

namespace sof::test {

// L=2, C=64, Vp=2304: wte has 147456 elements = 3 stat pieces, so small buckets split it.
inline model::ArchConfig tiny_gpt2() {
    model::ArchConfig g;
    g.max_seq_len = 64;
    g.vocab_size = 2300;
    g.padded_vocab_size = 2304;
    g.num_layers = 2;
    g.num_heads = 2;
    g.channels = 64;
    return g;
}

inline config::Config base_deck() {
    config::Config c;
    c.optimizer.plugin_dir = SOF_PLUGIN_DIR;
    c.optimizer.threads = 1;
    c.optimizer.weight_decay = 0.1f;
    c.device.type = config::DeviceType::Host;
    c.device.memory_gb = 1.0;
    c.offload.enabled = false;
    c.offload.gpu_tail_buckets = 0;
    c.offload.weights = config::WeightsPolicy::Stationary;
    return c;
}

inline uint32_t hash32(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return static_cast<uint32_t>(x);
}
// Deterministic value in [-1, 1) of (a, b, i).
inline float noise(uint64_t a, uint64_t b, uint64_t i) {
    return static_cast<float>(hash32((a * 1000003ULL + b) * 0x9E3779B97F4A7C15ULL + i) >> 8) /
               8388608.0f -
           1.0f;
}

// The fake model's access to what an Updater hands out: bf16 weights (bf16_weights()) widened;
// on a device the host cannot read (dev non-null: CUDA), through copies on a stream of its own
// after every stream of the device is idle (the engine's memsets and uploads included).
class FakeIo {
  public:
    FakeIo(const offload::Updater& u, device::Device* dev)
        : w16_(u.bf16_weights()), dev_(dev && !dev->host_accessible() ? dev : nullptr) {
        if (dev_) st_ = dev_->create_stream("fake model");
    }
    // dst (n) = the unit's weights as fp32
    void weights(float* dst, const float* src, size_t n) {
        const size_t bytes = n * (w16_ ? 2 : 4);
        const void* from = src;
        if (dev_) {
            tmp_.resize(bytes);
            get(tmp_.data(), src, bytes);
            from = tmp_.data();
        }
        if (!w16_) {
            std::memcpy(dst, from, bytes);
            return;
        }
        const uint16_t* h = static_cast<const uint16_t*>(from);
        for (size_t i = 0; i < n; i++)
            dst[i] = core::bf16_to_f32(h[i]);
    }
    // g (n) += add (n)
    void add_grads(float* g, const float* add, size_t n) {
        if (!dev_) {
            for (size_t i = 0; i < n; i++)
                g[i] += add[i];
            return;
        }
        std::vector<float> h(n);
        get(h.data(), g, n * 4);
        for (size_t i = 0; i < n; i++)
            h[i] += add[i];
        dev_->copy(g, h.data(), n * 4, device::CopyKind::HostToDevice, *st_);
        dev_->synchronize(*st_);
    }

  private:
    void get(void* dst, const void* src, size_t bytes) {
        dev_->synchronize();
        dev_->copy(dst, src, bytes, device::CopyKind::DeviceToHost, *st_);
        dev_->synchronize(*st_);
    }
    bool w16_;
    device::Device* dev_;
    std::unique_ptr<device::Stream> st_;
    std::vector<char> tmp_;
};

// Drives one forward + backward of a fake model through an Updater's WeightSource/GradSink.
// Grads of element i: 0.05 * w[i] + amp * noise(step, micro, i), where w is what the backward
// acquire returned (so wrong working weights show up in the grads). `seen` gets the weights the
// forward read (num_params), as fp32. dev: the device of the updater's buffers (FakeIo).
inline void fake_fwd_bwd(const model::ParamLayout& l, offload::Updater& u, int64_t step, int micro,
                         float amp, std::vector<float>& seen, device::Device* dev = nullptr) {
    FakeIo io(u, dev);
    int L = l.cfg.num_layers;
    seen.assign(l.num_params, 0.0f);
    model::WeightSource& w = u.weights();
    auto unit_n = [&](int k) { return l.unit_begin[k + 1] - l.unit_begin[k]; };
    const float* p0 = w.acquire(0, model::Pass::Forward);
    io.weights(seen.data(), p0, unit_n(0));
    for (int k = 1; k <= L + 1; k++) {
        const float* p = w.acquire(k, model::Pass::Forward);
        io.weights(seen.data() + l.unit_begin[k], p, unit_n(k));
        w.release(k, model::Pass::Forward);
    }
    w.release(0, model::Pass::Forward);
    model::GradSink& g = u.grads();
    std::vector<float> wk, add;
    auto grad_unit = [&](int k, const float* p) {
        float* gk = g.grads(k);
        size_t o = l.unit_begin[k];
        wk.resize(unit_n(k));
        add.resize(unit_n(k));
        io.weights(wk.data(), p, unit_n(k));
        for (size_t i = 0; i < unit_n(k); i++)
            add[i] = 0.05f * wk[i] + amp * noise(static_cast<uint64_t>(step), micro, o + i);
        io.add_grads(gk, add.data(), unit_n(k));
    };
    const float* b0 = w.acquire(0, model::Pass::Backward);
    for (int k = L + 1; k >= 1; k--) {
        const float* p = w.acquire(k, model::Pass::Backward);
        grad_unit(k, p);
        w.release(k, model::Pass::Backward);
        g.unit_done(k);
    }
    grad_unit(0, b0);
    w.release(0, model::Pass::Backward);
    g.unit_done(0);
}

struct StepPlan {
    float amp = 0.01f; // grad noise amplitude
    float clip = 0.0f; // grad_clip
    bool nan = false;  // inject a non-finite grad
};

struct State {
    std::vector<float> p, m, v;
    int64_t t = 0;
};

inline State state_of(offload::Updater& u, size_t n) {
    State s;
    s.p.resize(n);
    s.m.resize(n);
    s.v.resize(n);
    u.get_state(s.p.data(), s.m.data(), s.v.data(), &s.t);
    return s;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Initial state: N(0-ish) params, zero moments.
inline void init_state(offload::Updater& u, const model::ParamLayout& l) {
    std::vector<float> p(l.num_params), z(l.num_params, 0.0f);
    for (size_t i = 0; i < p.size(); i++)
        p[i] = 0.1f * noise(7, 7, i);
    u.set_state(p.data(), z.data(), z.data(), 0);
}

// Runs the same steps on both updaters and requires bitwise equal weights seen by the model,
// reports and final states. Returns the engine's reports.
inline std::vector<offload::StepReport> run_compare(offload::Updater& ref, offload::Updater& eng,
                                                    const model::ParamLayout& l,
                                                    const std::vector<StepPlan>& plan, int accum,
                                                    std::function<void()> before_eng_backward = {},
                                                    device::Device* eng_dev = nullptr) {
    std::vector<offload::StepReport> reps;
    std::vector<float> seen_a, seen_b;
    for (size_t s = 0; s < plan.size(); s++) {
        offload::StepHparams hp;
        hp.step = static_cast<int64_t>(s);
        hp.lr = 1e-2f;
        hp.grad_clip = plan[s].clip;
        hp.inject_nonfinite = plan[s].nan;
        offload::StepReport r[2];
        for (int k = 0; k < 2; k++) {
            offload::Updater& u = k == 0 ? ref : eng;
            std::vector<float>& seen = k == 0 ? seen_a : seen_b;
            u.begin_step(hp);
            for (int m = 0; m < accum; m++) {
                u.begin_micro(m, m == accum - 1);
                if (k == 1 && before_eng_backward) before_eng_backward();
                fake_fwd_bwd(l, u, hp.step, m, plan[s].amp, seen, k == 1 ? eng_dev : nullptr);
            }
            r[k] = u.finish_step();
        }
        INFO("step " << s);
        CHECK(bitwise_equal(seen_a, seen_b));
        CHECK((r[0].grad_norm == r[1].grad_norm ||
               (std::isnan(r[0].grad_norm) && std::isnan(r[1].grad_norm))));
        CHECK(r[0].skipped == r[1].skipped);
        CHECK(r[0].clipped == r[1].clipped);
        reps.push_back(r[1]);
    }
    State a = state_of(ref, l.num_params), b = state_of(eng, l.num_params);
    CHECK(a.t == b.t);
    CHECK(bitwise_equal(a.p, b.p));
    CHECK(bitwise_equal(a.m, b.m));
    CHECK(bitwise_equal(a.v, b.v));
    return reps;
}

} // namespace sof::test
