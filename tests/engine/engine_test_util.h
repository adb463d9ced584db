// Helpers of the engine tests: a deck for a tiny GPT-2 layout, a fake model that drives an Updater
// exactly like GPT2 does (acquire/release order, unit_done order) with grads that depend on the
// working weights it was given, and a runner comparing two updaters bitwise step by step.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "config/config.h"
#include "core/dtype.h"
#include "core/log.h"
#include "device/device.h"
#include "kernels/residual.h"
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

// Whether combination i of a configuration sweep runs: all of them unless SOF_TEST_SWEEP_STRIDE=s
// is set, then every s-th (i % s == 0). The TSan build sets it (scripts/run_sanitizers.sh): there
// each combination costs 20-50x its plain time, and the plain and ASan runs cover every one.
inline bool sweep_runs(int i) {
    const char* e = std::getenv("SOF_TEST_SWEEP_STRIDE");
    const int s = e ? std::atoi(e) : 1;
    return s <= 1 || i % s == 0;
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

// How the fake model reaches an updater's buffers on a device the host cannot read (CUDA): as
// the real model does, on the compute stream the engine orders its streams against, never by
// synchronizing the whole device. delay (may be empty) enqueues a busy kernel of known length on
// the compute stream ahead of each unit's grads, so an engine stream that reads them without
// waiting for the compute stream's event reads stale grads (tests/cuda/spin.h).
struct DeviceIo {
    device::Device* dev = nullptr;
    device::Stream* compute = nullptr;
    std::function<void(device::Stream&)> delay;
};

// The fake model's access to what an Updater hands out: bf16 weights (bf16_weights()) widened;
// with a DeviceIo whose device the host cannot read, through pinned staging and copies and
// kernels on the compute stream: the weights read once the compute stream has caught up (the
// engine makes it wait for the uploads and fetches), the grads added by a kernel queued behind
// the delay, with no host synchronization before the engine's unit_done.
class FakeIo {
  public:
    FakeIo(const offload::Updater& u, const DeviceIo* io)
        : w16_(u.bf16_weights()), io_(io && io->dev && !io->dev->host_accessible() ? io : nullptr) {
    }
    ~FakeIo() {
        if (!io_) return;
        io_->dev->synchronize(*io_->compute); // the queued grads read the staging below
        for (void* p : pinned_)
            io_->dev->free_pinned(p);
    }
    FakeIo(const FakeIo&) = delete;
    FakeIo& operator=(const FakeIo&) = delete;
    // dst (n) = the unit's weights as fp32
    void weights(float* dst, const float* src, size_t n) {
        const size_t bytes = n * (w16_ ? 2 : 4);
        const void* from = src;
        if (io_) {
            void* h = pinned(bytes);
            io_->dev->copy(h, src, bytes, device::CopyKind::DeviceToHost, *io_->compute);
            io_->dev->synchronize(*io_->compute);
            from = h;
        }
        if (!w16_) {
            std::memcpy(dst, from, bytes);
            return;
        }
        const uint16_t* h = static_cast<const uint16_t*>(from);
        for (size_t i = 0; i < n; i++)
            dst[i] = core::bf16_to_f32(h[i]);
    }
    // g (n) += add (n); on a device: queued on the compute stream behind the delay
    void add_grads(float* g, const float* add, size_t n) {
        if (!io_) {
            for (size_t i = 0; i < n; i++)
                g[i] += add[i];
            return;
        }
        // pinned staging that lives until this FakeIo is gone (the kernel reads it after the
        // delay; pinned memory is device-accessible under unified addressing) and is outside the
        // device's accounting (the tests compare the device's peak with the engine's plan)
        float* h = static_cast<float*>(pinned(n * 4));
        std::memcpy(h, add, n * 4);
        device::Stream& cs = *io_->compute;
        if (io_->delay) io_->delay(cs);
        io_->dev->launch(cs, "fake model grads", [g, h, n](const kernels::Exec& ex) {
            kernels::add_inplace<float>(ex, g, h, static_cast<long>(n));
        });
    }

  private:
    void* pinned(size_t bytes) {
        pinned_.push_back(io_->dev->alloc_pinned(bytes, "fake model staging"));
        return pinned_.back();
    }
    bool w16_;
    const DeviceIo* io_;
    std::vector<void*> pinned_;
};

// Drives one forward + backward of a fake model through an Updater's WeightSource/GradSink.
// Grads of element i: 0.05 * w[i] + amp * noise(step, micro, i), where w is what the backward
// acquire returned (so wrong working weights show up in the grads). `seen` gets the weights the
// forward read (num_params), as fp32. dio: how to reach a device's buffers (FakeIo; null: host
// memory).
inline void fake_fwd_bwd(const model::ParamLayout& l, offload::Updater& u, int64_t step, int micro,
                         float amp, std::vector<float>& seen, const DeviceIo* dio = nullptr) {
    FakeIo io(u, dio);
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
                                                    const DeviceIo* eng_dev = nullptr) {
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
