// Bitwise properties of the CPU GPT-2: recompute on/off, OpenMP/OpenBLAS thread counts, per-unit
// weight flow and grad sinks (the offload engine's contract in gpt2.h), padded vocab/positions.
#include <doctest/doctest.h>

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "model/transformer.h"
#include "model_test_util.h"

using namespace sof;
using sof::testing::gpt2_ref;

namespace {

// Forward + backward of the reference batch; returns loss, grads and dlogits.
struct Result {
    float loss = 0;
    std::vector<float> grads, dlogits;
};

Result run(const model::ArchConfig& cfg, const std::vector<float>& params, bool recompute,
           const std::vector<int>& inputs, const std::vector<int>& targets, int B, int T) {
    model::Transformer gpt(cfg, model::ModelOptions{recompute}, B, T);
    Result r;
    r.grads.assign(gpt.layout().num_params, 0.0f);
    model::FlatWeights w(gpt.layout(), params.data());
    model::FlatGrads g(gpt.layout(), r.grads.data());
    for (int rep = 0; rep < 2; rep++) { // twice: the second pass must not see stale state
        std::fill(r.grads.begin(), r.grads.end(), 0.0f);
        r.loss = gpt.forward(w, inputs.data(), targets.data(), B, T);
        gpt.backward(w, g, 1.0f / static_cast<float>(B * T));
    }
    r.dlogits = gpt.logits();
    return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A model big enough that OpenMP loops and OpenBLAS split work across threads.
struct Medium {
    model::ArchConfig cfg;
    std::vector<float> params;
    std::vector<int> inputs, targets;
    int B = 2, T = 64;
    Medium() {
        cfg.max_seq_len = 64;
        cfg.vocab_size = 500;
        cfg.padded_vocab_size = 512;
        cfg.num_layers = 2;
        cfg.num_heads = 4;
        cfg.channels = 128;
        const model::ParamLayout lay = model::make_layout(cfg);
        params.resize(lay.num_params);
        model::init_params(lay, params.data(), 0.1f, 42);
        for (int i = 0; i < B * T; i++) {
            inputs.push_back((i * 7919 + 13) % cfg.vocab_size);
            targets.push_back((i * 104729 + 5) % cfg.vocab_size);
        }
    }
};

} // namespace

TEST_CASE("recompute on and off give bitwise identical loss, grads and dlogits") {
    const auto& ref = gpt2_ref();
    const model::ParamLayout lay = model::make_layout(ref.config);
    const std::vector<float> params = sof::testing::ref_to_flat(lay, ref.params);
    const Result off = run(ref.config, params, false, ref.inputs, ref.targets, ref.B, ref.T);
    const Result on = run(ref.config, params, true, ref.inputs, ref.targets, ref.B, ref.T);
    CHECK(off.loss == on.loss);
    CHECK(bitwise_equal(off.grads, on.grads));
    CHECK(bitwise_equal(off.dlogits, on.dlogits));
    const Medium m;
    const Result moff = run(m.cfg, m.params, false, m.inputs, m.targets, m.B, m.T);
    const Result mon = run(m.cfg, m.params, true, m.inputs, m.targets, m.B, m.T);
    CHECK(moff.loss == mon.loss);
    CHECK(bitwise_equal(moff.grads, mon.grads));
}

TEST_CASE("results do not depend on the OpenMP or OpenBLAS thread count") {
    const Medium m;
    const int saved_omp = omp_get_max_threads(), saved_blas = openblas_get_num_threads();
    std::vector<Result> results;
    for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
        results.push_back(run(m.cfg, m.params, false, m.inputs, m.targets, m.B, m.T));
    }
    omp_set_num_threads(saved_omp);
    openblas_set_num_threads(saved_blas);
    for (size_t i = 1; i < results.size(); i++) {
        CAPTURE(i + 1);
        CHECK(results[i].loss == results[0].loss);
        CHECK(bitwise_equal(results[i].grads, results[0].grads));
        CHECK(bitwise_equal(results[i].dlogits, results[0].dlogits));
    }
}

namespace {

// Copies each unit into its own buffer on acquire and poisons it with NaN on release, so a kernel
// that reads a unit outside its acquire/release window (or at a wrong offset) shows up as NaN.
class PoisoningWeights : public model::WeightSource {
  public:
    PoisoningWeights(const model::ParamLayout& lay, const float* params) : lay_(lay), p_(params) {
        bufs_.resize(static_cast<size_t>(lay.num_units()));
        held_.assign(bufs_.size(), 0);
    }
    const float* acquire(int u, model::Pass) override {
        const size_t b = lay_.unit_begin[static_cast<size_t>(u)];
        const size_t e = lay_.unit_begin[static_cast<size_t>(u) + 1];
        auto& buf = bufs_[static_cast<size_t>(u)];
        buf.assign(p_ + b, p_ + e);
        held_[static_cast<size_t>(u)]++;
        events.push_back(u); // acquire: +u
        max_held = std::max(max_held, held_count());
        return buf.data();
    }
    void release(int u, model::Pass) override {
        auto& buf = bufs_[static_cast<size_t>(u)];
        std::fill(buf.begin(), buf.end(), std::numeric_limits<float>::quiet_NaN());
        held_[static_cast<size_t>(u)]--;
        events.push_back(-1 - u); // release: -1-u
    }
    int held_count() const {
        int n = 0;
        for (int h : held_)
            n += h;
        return n;
    }
    int max_held = 0;
    std::vector<int> events; // acquire u -> u, release u -> -1-u, in call order

  private:
    const model::ParamLayout& lay_;
    const float* p_;
    std::vector<std::vector<float>> bufs_;
    std::vector<int> held_;
};

// Separate grad buffer per unit; records the unit_done order and that no unit is written after
// its unit_done (the buffer is compared with its copy taken at unit_done).
class UnitGrads : public model::GradSink {
  public:
    explicit UnitGrads(const model::ParamLayout& lay) : lay_(lay) {
        for (int u = 0; u < lay.num_units(); u++)
            bufs.emplace_back(lay.unit_begin[static_cast<size_t>(u) + 1] -
                                  lay.unit_begin[static_cast<size_t>(u)],
                              0.0f);
        snap = bufs;
    }
    float* grads(int u) override { return bufs[static_cast<size_t>(u)].data(); }
    void unit_done(int u) override {
        order.push_back(u);
        snap[static_cast<size_t>(u)] = bufs[static_cast<size_t>(u)];
    }
    std::vector<float> flat() const {
        std::vector<float> f;
        for (const auto& b : bufs)
            f.insert(f.end(), b.begin(), b.end());
        return f;
    }
    std::vector<std::vector<float>> bufs, snap;
    std::vector<int> order;

  private:
    const model::ParamLayout& lay_;
};

} // namespace

TEST_CASE("weight flow: per-unit buffers and grad sinks give the flat result, in unit order") {
    const auto& ref = gpt2_ref();
    const model::ParamLayout lay = model::make_layout(ref.config);
    const std::vector<float> params = sof::testing::ref_to_flat(lay, ref.params);
    for (bool recompute : {false, true}) {
        CAPTURE(recompute);
        const Result flat =
            run(ref.config, params, recompute, ref.inputs, ref.targets, ref.B, ref.T);
        model::Transformer gpt(ref.config, model::ModelOptions{recompute}, ref.B, ref.T);
        PoisoningWeights w(lay, params.data());
        UnitGrads g(lay);
        const float loss = gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
        CHECK(w.held_count() == 0);
        // the order the offload engine's weight prefetch relies on (lib/offload/engine_weights.cpp)
        const int L = ref.config.num_layers;
        std::vector<int> want_fwd = {0};
        for (int u = 1; u <= L; u++)
            want_fwd.insert(want_fwd.end(), {u, -1 - u});
        want_fwd.insert(want_fwd.end(), {L + 1, -1 - (L + 1), -1});
        CHECK(w.events == want_fwd);
        w.events.clear();
        CHECK(w.max_held == 2); // embeddings (held for the LM head) + one block or the final LN
        gpt.backward(w, g, 1.0f / static_cast<float>(ref.B * ref.T));
        CHECK(w.held_count() == 0);
        std::vector<int> want_bwd = {0, L + 1, -1 - (L + 1)};
        for (int u = L; u >= 1; u--)
            want_bwd.insert(want_bwd.end(), {u, -1 - u});
        want_bwd.push_back(-1);
        CHECK(w.events == want_bwd);
        CHECK(loss == flat.loss);
        CHECK(bitwise_equal(g.flat(), flat.grads));
        CHECK(g.snap == g.bufs); // nothing written after unit_done
        std::vector<int> want;
        for (int u = lay.num_units() - 1; u >= 0; u--)
            want.push_back(u);
        CHECK(g.order == want);
    }
}

TEST_CASE("backward adds into the sink's grads") {
    const auto& ref = gpt2_ref();
    const model::ParamLayout lay = model::make_layout(ref.config);
    const std::vector<float> params = sof::testing::ref_to_flat(lay, ref.params);
    const Result base = run(ref.config, params, false, ref.inputs, ref.targets, ref.B, ref.T);
    model::Transformer gpt(ref.config, model::ModelOptions{}, ref.B, ref.T);
    std::vector<float> grads(lay.num_params, 0.5f);
    model::FlatWeights w(lay, params.data());
    model::FlatGrads g(lay, grads.data());
    gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    gpt.backward(w, g, 1.0f / static_cast<float>(ref.B * ref.T));
    double worst = 0;
    for (size_t i = 0; i < grads.size(); i++)
        worst = std::max(worst, std::fabs(static_cast<double>(grads[i]) - 0.5 - base.grads[i]));
    CHECK(worst < 1e-6); // 0.5 + g rounds at 0.5's ulp (6e-8)
}

TEST_CASE("padded vocab rows and unused positions get exactly zero grads and probabilities") {
    const auto& ref = gpt2_ref();
    const model::ArchConfig& c = ref.config;
    model::Transformer gpt(c, model::ModelOptions{}, ref.B, ref.T);
    const model::ParamLayout& lay = gpt.layout();
    const std::vector<float> params = sof::testing::ref_to_flat(lay, ref.params);
    std::vector<float> grads(lay.num_params, 0.0f);
    model::FlatWeights w(lay, params.data());
    model::FlatGrads g(lay, grads.data());
    gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    const size_t N = static_cast<size_t>(ref.B) * ref.T, Vp = c.padded_vocab_size;
    // the probabilities are the dlogits + onehot(target) for dloss = 1
    gpt.backward(w, g, 1.0f);
    const std::vector<float> dl = gpt.logits();
    for (size_t n = 0; n < N; n++) {
        double s = 0;
        for (size_t v = 0; v < Vp; v++) {
            const float p = dl[n * Vp + v] + (static_cast<int>(v) == ref.targets[n] ? 1.0f : 0.0f);
            if (v >= static_cast<size_t>(c.vocab_size)) CHECK(p == 0.0f);
            s += p;
        }
        CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
    }
    std::fill(grads.begin(), grads.end(), 0.0f);
    gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    gpt.backward(w, g, 1.0f / static_cast<float>(N));
    const size_t C = c.channels;
    const float* wte = grads.data() + lay.offset_of(model::TensorKind::Wte, -1);
    const float* wpe = grads.data() + lay.offset_of(model::TensorKind::Wpe, -1);
    int nonzero = 0;
    for (size_t i = static_cast<size_t>(c.vocab_size) * C; i < Vp * C; i++)
        nonzero += wte[i] != 0.0f;
    for (size_t i = static_cast<size_t>(ref.T) * C; i < static_cast<size_t>(c.max_seq_len) * C; i++)
        nonzero += wpe[i] != 0.0f;
    CHECK(nonzero == 0);
    const std::vector<float> dlogits = gpt.logits();
    for (size_t n = 0; n < N; n++)
        for (size_t v = static_cast<size_t>(c.vocab_size); v < Vp; v++)
            CHECK(dlogits[n * Vp + v] == 0.0f); // dlogits of padded columns
}
