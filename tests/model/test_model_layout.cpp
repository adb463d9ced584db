// GPT-2 parameter layout, config validation, init, FLOPs model and the model's error messages:
// exact expectations (llm.c's GPT-2 124M parameter count, hand-written 6N + attention formula).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strfmt.h"
#include "model/transformer.h"
#include "model_test_util.h"

using namespace sof;
using model::ArchConfig;
using model::TensorKind;

namespace {

ArchConfig gpt2_124m() {
    return ArchConfig{}; // the defaults are GPT-2 small with llm.c's padded vocab
}

ArchConfig tiny() {
    ArchConfig c;
    c.max_seq_len = 8;
    c.vocab_size = 11;
    c.padded_vocab_size = 16;
    c.num_layers = 3;
    c.num_heads = 2;
    c.channels = 8;
    return c;
}

std::string error_of(const ArchConfig& c) {
    try {
        model::validate(c);
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("layout: GPT-2 124M has llm.c's parameter count") {
    const model::ParamLayout lay = model::make_layout(gpt2_124m());
    CHECK(lay.num_params == 124475904u); // llm.c train_gpt2: "num_parameters: 124475904"
    CHECK(lay.tensors.size() == 2u + 12u * 12u + 2u);
    CHECK(lay.num_units() == 14);
}

TEST_CASE("layout: tensor table is contiguous, unit-major, with llm.c shapes") {
    const ArchConfig c = tiny();
    const model::ParamLayout lay = model::make_layout(c);
    const int L = c.num_layers, C = c.channels;
    size_t off = 0;
    for (const model::TensorInfo& t : lay.tensors) {
        CHECK(t.offset == off);
        size_t n = 1;
        for (int d : t.shape)
            n *= static_cast<size_t>(d);
        CHECK(t.numel == n);
        CHECK(t.decay == (t.shape.size() == 2)); // matrices and embeddings only
        CHECK(lay.unit_begin[static_cast<size_t>(t.unit)] <= t.offset);
        CHECK(t.offset + t.numel <= lay.unit_begin[static_cast<size_t>(t.unit) + 1]);
        CHECK(t.offset == lay.offset_of(t.kind, t.layer));
        const std::string base = model::tensor_kind_name(t.kind);
        CHECK(t.name == (t.layer >= 0 ? core::strfmt("h%d.%s", t.layer, base.c_str()) : base));
        off += t.numel;
    }
    CHECK(off == lay.num_params);
    CHECK(lay.unit_begin.front() == 0u);
    CHECK(lay.unit_begin.back() == lay.num_params);
    REQUIRE(lay.unit_begin.size() == static_cast<size_t>(L) + 3);
    const size_t block = 12u * C * C + 13u * C;
    CHECK(lay.unit_begin[1] == static_cast<size_t>(c.padded_vocab_size + c.max_seq_len) * C);
    for (int l = 0; l < L; l++)
        CHECK(lay.unit_begin[static_cast<size_t>(l) + 2] -
                  lay.unit_begin[static_cast<size_t>(l) + 1] ==
              block);
    CHECK(lay.num_params - lay.unit_begin[static_cast<size_t>(L) + 1] == 2u * C);

    const auto shape = [&](TensorKind k, int l) {
        for (const model::TensorInfo& t : lay.tensors)
            if (t.kind == k && (t.layer == l || t.layer < 0)) return t.shape;
        return std::vector<int>{};
    };
    CHECK(shape(TensorKind::Wte, -1) == std::vector<int>{c.padded_vocab_size, C});
    CHECK(shape(TensorKind::Wpe, -1) == std::vector<int>{c.max_seq_len, C});
    CHECK(shape(TensorKind::Qkvw, 1) == std::vector<int>{3 * C, C});
    CHECK(shape(TensorKind::Qkvb, 1) == std::vector<int>{3 * C});
    CHECK(shape(TensorKind::Attprojw, 2) == std::vector<int>{C, C});
    CHECK(shape(TensorKind::Fcw, 0) == std::vector<int>{4 * C, C});
    CHECK(shape(TensorKind::Fcb, 0) == std::vector<int>{4 * C});
    CHECK(shape(TensorKind::Fcprojw, 2) == std::vector<int>{C, 4 * C});
    CHECK(shape(TensorKind::Lnfb, -1) == std::vector<int>{C});
    CHECK_THROWS_AS(lay.offset_of(TensorKind::Qkvw, L), core::Error);
}

TEST_CASE("validate: bad configs name the field and the fix") {
    ArchConfig c = tiny();
    c.channels = 10;
    c.num_heads = 3;
    CHECK(error_of(c).find("model.channels = 10 is not divisible by model.num_heads = 3") !=
          std::string::npos);
    c = tiny();
    c.padded_vocab_size = 10;
    CHECK(error_of(c).find("model.padded_vocab_size = 10 is smaller") != std::string::npos);
    c = tiny();
    c.num_layers = 0;
    CHECK(error_of(c).find("model.num_layers = 0 must be positive") != std::string::npos);
    CHECK(error_of(tiny()).empty());
}

TEST_CASE("flops_per_token: 6N (without positions) + 12 L T C") {
    const ArchConfig c = gpt2_124m();
    const double n = 124475904.0 - 1024.0 * 768.0; // wpe is a lookup, not a matmul
    const double want = 6.0 * n + 12.0 * 12 * 1024 * 768;
    CHECK(model::flops_per_token(c, 1024) == doctest::Approx(want).epsilon(1e-12));
    CHECK(want == 855383040.0);
    // the attention term grows linearly with T
    CHECK(model::flops_per_token(c, 2048) - model::flops_per_token(c, 1024) ==
          doctest::Approx(12.0 * 12 * 1024 * 768));
}

TEST_CASE("init_params: seeded, GPT-2 scales, padded wte rows zero") {
    const ArchConfig c = tiny();
    const model::ParamLayout lay = model::make_layout(c);
    std::vector<float> a(lay.num_params), b(lay.num_params), d(lay.num_params);
    model::init_params(lay, a.data(), 0.02f, 7);
    model::init_params(lay, b.data(), 0.02f, 7);
    model::init_params(lay, d.data(), 0.02f, 8);
    CHECK(a == b);
    CHECK(a != d);
    for (const model::TensorInfo& t : lay.tensors) {
        const float* p = a.data() + t.offset;
        CAPTURE(t.name);
        switch (t.kind) {
        case TensorKind::Ln1w:
        case TensorKind::Ln2w:
        case TensorKind::Lnfw:
            for (size_t i = 0; i < t.numel; i++)
                CHECK(p[i] == 1.0f);
            break;
        case TensorKind::Wte:
            for (size_t i = static_cast<size_t>(c.vocab_size) * c.channels; i < t.numel; i++)
                CHECK(p[i] == 0.0f);
            break;
        default:
            if (t.shape.size() == 1)
                for (size_t i = 0; i < t.numel; i++)
                    CHECK(p[i] == 0.0f);
        }
    }
    CHECK_THROWS_AS(model::init_params(lay, a.data(), 0.0f, 1), core::Error);
    // standard deviations on a larger model (enough samples for a 5% check)
    ArchConfig big = tiny();
    big.channels = 128;
    big.num_heads = 4;
    big.num_layers = 2;
    const model::ParamLayout bl = model::make_layout(big);
    std::vector<float> p(bl.num_params);
    model::init_params(bl, p.data(), 0.02f, 3);
    const auto stdev = [&](TensorKind k) {
        for (const model::TensorInfo& t : bl.tensors) {
            if (t.kind != k || t.layer > 0) continue;
            double s = 0;
            for (size_t i = 0; i < t.numel; i++)
                s += static_cast<double>(p[t.offset + i]) * p[t.offset + i];
            return std::sqrt(s / static_cast<double>(t.numel));
        }
        return 0.0;
    };
    CHECK(stdev(TensorKind::Fcw) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stdev(TensorKind::Qkvw) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stdev(TensorKind::Fcprojw) == doctest::Approx(0.02 / std::sqrt(4.0)).epsilon(0.05));
}

TEST_CASE("GPT2: bad batches and tokens are rejected with a message") {
    const ArchConfig c = tiny();
    model::Transformer gpt(c, model::ModelOptions{}, 2, 4);
    std::vector<float> params(gpt.layout().num_params, 0.01f), grads(params.size());
    model::FlatWeights w(gpt.layout(), params.data());
    model::FlatGrads g(gpt.layout(), grads.data());
    std::vector<int> tok = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_THROWS_WITH_AS(gpt.backward(w, g, 0.1f),
                         doctest::Contains("without a forward with targets"), core::Error);
    CHECK_THROWS_WITH_AS(gpt.forward(w, tok.data(), tok.data(), 3, 4),
                         doctest::Contains("outside the allocated"), core::Error);
    tok[5] = c.vocab_size; // a padded-vocab id is not a valid token
    CHECK_THROWS_WITH_AS(gpt.forward(w, tok.data(), nullptr, 2, 4),
                         doctest::Contains("input token 11 at position 5"), core::Error);
    CHECK_THROWS_WITH_AS(model::Transformer(c, model::ModelOptions{}, 1, 9),
                         doctest::Contains("exceeds model.max_seq_len = 8"), core::Error);
    tok[5] = 0;
    CHECK(gpt.forward(w, tok.data(), nullptr, 2, 4) == 0.0f); // no targets: no loss
    CHECK_THROWS_AS(gpt.backward(w, g, 0.1f), core::Error);
}
