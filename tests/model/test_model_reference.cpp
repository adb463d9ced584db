// GPT-2 CPU model against the PyTorch float64 oracle (tests/data/gpt2_ref.bin): logits, loss, every
// gradient, 10 AdamW steps with global-norm clipping (optim/adam_ref.h), causal prefix runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "model_test_util.h"
#include "optim/adam_ref.h"

using namespace sof;
using sof::testing::compare;
using sof::testing::ErrStats;
using sof::testing::gpt2_ref;
using sof::testing::print_err;

namespace {

// Tolerances (docs/model.md explains them). rel = max abs error / max |reference| per tensor.
constexpr double kLogitsRel = 2e-6; // fp32 forward: a few ulps of the largest logit
constexpr double kLossRel = 1e-6;
constexpr double kGradRel = 2e-5;      // fp32 backward, deepest tensors accumulate the most error
constexpr double kTrainLossRel = 2e-5; // losses along 10 AdamW steps (params drift apart a little)
constexpr double kTrainNormRel = 1e-4; // grad norms along the steps (measured up to 1e-5)
constexpr double kFinalAbs = 1e-6;     // final params: absolute floor added to the sensitivity

struct Run {
    model::Transformer gpt;
    std::vector<float> params, grads;
    float loss = 0;
    explicit Run(bool recompute, int B, int T)
        : gpt(gpt2_ref().config, model::ModelOptions{recompute}, B, T),
          params(sof::testing::ref_to_flat(gpt.layout(), gpt2_ref().params)),
          grads(gpt.layout().num_params, 0.0f) {}
    void fwd_bwd() {
        const auto& ref = gpt2_ref();
        model::FlatWeights w(gpt.layout(), params.data());
        model::FlatGrads g(gpt.layout(), grads.data());
        std::fill(grads.begin(), grads.end(), 0.0f);
        loss = gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
        gpt.backward(w, g, 1.0f / static_cast<float>(ref.B * ref.T));
    }
};

} // namespace

TEST_CASE("reference file: header and shapes") {
    const auto& ref = gpt2_ref();
    CHECK(ref.config.vocab_size < ref.config.padded_vocab_size);
    CHECK(ref.T < ref.config.max_seq_len); // unused wpe rows exist
    CHECK(ref.steps == 10);
    CHECK(ref.train_losses.size() == 10);
    CHECK(ref.train_losses[0] == ref.loss);
    int clipped = 0;
    for (float n : ref.train_norms)
        clipped += n > ref.grad_clip;
    CHECK(clipped > 0); // both kinds of steps are exercised
    CHECK(clipped < ref.steps);
}

TEST_CASE("forward: logits and loss match PyTorch") {
    const auto& ref = gpt2_ref();
    Run r(false, ref.B, ref.T);
    r.fwd_bwd();
    const size_t n = static_cast<size_t>(ref.B) * ref.T * ref.config.padded_vocab_size;
    // logits() holds dlogits after backward: run the forward alone for the logits
    model::FlatWeights w(r.gpt.layout(), r.params.data());
    const float loss = r.gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    const ErrStats s = compare(r.gpt.logits().data(), ref.logits.data(), n);
    print_err("forward", "logits", s);
    std::printf("  forward loss %.8f ref %.8f\n", loss, ref.loss);
    CHECK(s.finite);
    CHECK(s.rel < kLogitsRel);
    CHECK(std::fabs(loss - ref.loss) <= kLossRel * ref.loss);
    CHECK(loss == r.loss); // forward is deterministic
}

TEST_CASE("backward: every gradient matches PyTorch") {
    const auto& ref = gpt2_ref();
    Run r(false, ref.B, ref.T);
    r.fwd_bwd();
    for (int k = 0; k < model::kNumGpt2TensorKinds; k++) {
        const auto kind = static_cast<model::TensorKind>(k);
        const std::string name = model::tensor_kind_name(kind);
        const std::vector<float> got =
            sof::testing::flat_to_llmc(r.gpt.layout(), r.grads.data(), kind);
        const auto& want = ref.grads.at(name).data;
        REQUIRE(got.size() == want.size());
        const ErrStats s = compare(got.data(), want.data(), got.size());
        print_err("grad", name, s);
        CAPTURE(name);
        CHECK(s.finite);
        CHECK(s.max_ref > 0);
        CHECK(s.rel < kGradRel);
    }
}

TEST_CASE("training: 10 AdamW steps with clipping match torch.optim.AdamW") {
    const auto& ref = gpt2_ref();
    Run r(false, ref.B, ref.T);
    const model::ParamLayout& lay = r.gpt.layout();
    std::vector<float> m(lay.num_params, 0.0f), v(lay.num_params, 0.0f);
    for (int step = 1; step <= ref.steps; step++) {
        r.fwd_bwd();
        double sumsq = 0;
        for (float g : r.grads)
            sumsq += static_cast<double>(g) * g;
        const double norm = std::sqrt(sumsq);
        // torch.nn.utils.clip_grad_norm_: grads *= min(1, clip / (norm + 1e-6))
        const float coef = static_cast<float>(std::min(1.0, ref.grad_clip / (norm + 1e-6)));
        const float want_loss = ref.train_losses[static_cast<size_t>(step - 1)];
        const float want_norm = ref.train_norms[static_cast<size_t>(step - 1)];
        std::printf("  step %2d loss %.7f (ref %.7f) norm %.6f (ref %.6f) coef %.6f\n", step,
                    r.loss, want_loss, norm, want_norm, coef);
        CHECK(std::fabs(r.loss - want_loss) <= kTrainLossRel * want_loss);
        CHECK(std::fabs(norm - want_norm) <= kTrainNormRel * want_norm);
        for (const model::TensorInfo& t : lay.tensors) {
            sof_optim_hparams hp{};
            hp.struct_size = sizeof hp;
            hp.lr = static_cast<float>(ref.lr);
            hp.beta1 = static_cast<float>(ref.beta1);
            hp.beta2 = static_cast<float>(ref.beta2);
            hp.eps = static_cast<float>(ref.eps);
            hp.weight_decay = t.decay ? static_cast<float>(ref.weight_decay) : 0.0f;
            hp.step = step;
            hp.mode = SOF_ADAM_ADAMW;
            hp.bias_correction = 1;
            hp.grad_scale = coef;
            sof_optim_slice s{};
            s.struct_size = sizeof s;
            s.n = static_cast<int64_t>(t.numel);
            s.param = s.param_out = r.params.data() + t.offset;
            s.grad = r.grads.data() + t.offset;
            s.grad_dtype = SOF_DTYPE_F32;
            s.num_slots = 2;
            s.slot[0].data = s.slot[0].data_out = m.data() + t.offset;
            s.slot[1].data = s.slot[1].data_out = v.data() + t.offset;
            optim::adam_ref_step(s, hp);
        }
    }
    for (int k = 0; k < model::kNumGpt2TensorKinds; k++) {
        const auto kind = static_cast<model::TensorKind>(k);
        const std::string name = model::tensor_kind_name(kind);
        const std::vector<float> got = sof::testing::flat_to_llmc(lay, r.params.data(), kind);
        const auto& want = ref.final_params.at(name).data;
        const ErrStats s = compare(got.data(), want.data(), got.size());
        // per element: |got - want| <= kFinalAbs + sens (the reference's spread under fp32-sized
        // grad errors); ratio = how much of that allowance is used (worst element)
        const auto& sens = ref.final_sens.at(name).data;
        int over = 0;
        double ratio = 0;
        for (size_t i = 0; i < got.size(); i++) {
            const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
            over += e > kFinalAbs + sens[i];
            ratio = std::max(ratio, e / (kFinalAbs + sens[i]));
        }
        print_err("final", name, s);
        std::printf("                    worst element uses %.2f of its tolerance\n", ratio);
        CAPTURE(name);
        CHECK(s.finite);
        CHECK(over == 0);
    }
}

TEST_CASE("causal prefix: a shorter sequence and a smaller batch give the reference's logits") {
    const auto& ref = gpt2_ref();
    const int Vp = ref.config.padded_vocab_size, T2 = ref.T / 2 + 1;
    model::Transformer gpt(ref.config, model::ModelOptions{}, ref.B, ref.T);
    const std::vector<float> params = sof::testing::ref_to_flat(gpt.layout(), ref.params);
    model::FlatWeights w(gpt.layout(), params.data());
    // batch row 1 alone, its first T2 tokens
    std::vector<int> in(ref.inputs.begin() + ref.T, ref.inputs.begin() + ref.T + T2);
    gpt.forward(w, in.data(), nullptr, 1, T2);
    std::vector<float> want(ref.logits.begin() + static_cast<long>(ref.T) * Vp,
                            ref.logits.begin() + static_cast<long>(ref.T + T2) * Vp);
    const ErrStats s = compare(gpt.logits().data(), want.data(), want.size());
    print_err("prefix", "logits", s);
    CHECK(s.rel < kLogitsRel);
}

TEST_CASE("reference reader: bad files are rejected with the reason") {
    const std::string good = std::string(SOF_SOURCE_DIR) + "/tests/data/gpt2_ref.bin";
    std::vector<char> bytes = sof::testing::detail::read_all(good);
    const std::string path = std::string(SOF_BINARY_DIR) + "/gpt2_ref_bad.bin";
    const auto write = [&](const std::vector<char>& b) {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        REQUIRE(f);
        std::fwrite(b.data(), 1, b.size(), f);
        std::fclose(f);
    };
    const auto error_of = [&]() -> std::string {
        try {
            sof::testing::load_gpt2_reference(path);
        } catch (const core::Error& e) {
            return e.what();
        }
        return "";
    };
    std::vector<char> b = bytes;
    b.resize(b.size() / 2);
    write(b);
    CHECK(error_of().find("truncated") != std::string::npos);
    b = bytes;
    b[0] = 'X';
    write(b);
    CHECK(error_of().find("magic is not SOFGPT2R") != std::string::npos);
    b = bytes;
    b[8] = 2; // version 2
    write(b);
    CHECK(error_of().find("format version 2") != std::string::npos);
    b = bytes;
    b.push_back(0);
    write(b);
    CHECK(error_of().find("1 trailing bytes") != std::string::npos);
    write(bytes);
    CHECK(error_of().empty());
    std::remove(path.c_str());
    CHECK_THROWS_WITH_AS(sof::testing::load_gpt2_reference(path),
                         doctest::Contains("cannot open GPT-2 reference file"), core::Error);
}
