// One model config: the deck's model section <-> ArchConfig both ways, model::validate as the one
// check of sizes (bounds before any allocation) and divisibility (GQA heads, parallel.sp), with
// deck errors located at the line or --set that set the key.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "config/deck.h"
#include "core/error.h"
#include "model/layout.h"
#include "model/model_config.h"

using namespace sof;

namespace {

// The Config error of loading `yaml` (+ overrides) and validating its model; "" when none.
std::string deck_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
    try {
        config::Config c = config::load_deck_from_string(yaml, "deck.yaml", overrides);
        model::validate_deck(c);
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        return e.what();
    }
    return "";
}

std::string error_of(const model::ArchConfig& c, int sp = 1) {
    try {
        model::validate(c, sp);
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        return e.what();
    }
    return "";
}

bool has(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("config_for and set_deck_model are inverse for every architecture") {
    for (const char* type : {"gpt2", "llama", "qwen2", "qwen3"}) {
        CAPTURE(type);
        config::Config c = config::load_deck_from_string(
            "", "d.yaml",
            {std::string("model.type=") + type, "model.intermediate_size=96",
             "model.num_kv_heads=2", "model.rope_theta=500000", "model.rope_scaling.type=llama3",
             "model.tie_embeddings=false", "model.vocab_size=300"});
        const model::ArchConfig a = model::config_for(c.model);
        CHECK(a.padded_vocab_size == 384); // 0 = rounded up to 128
        config::ModelConfig back;          // every key at its default, then from `a`
        model::set_deck_model(a, &back);
        const model::ArchConfig b = model::config_for(back);
        CHECK(b.arch == a.arch);
        CHECK(b.num_layers == a.num_layers);
        CHECK(b.channels == a.channels);
        CHECK(b.padded_vocab_size == a.padded_vocab_size);
        CHECK(b.kv_heads() == a.kv_heads());
        CHECK(b.ffn_dim() == a.ffn_dim());
        CHECK(b.rope_theta == a.rope_theta);
        CHECK(b.rope_scaling.type == a.rope_scaling.type);
        CHECK(b.tie_embeddings == a.tie_embeddings);
        CHECK(b.qkv_bias == a.qkv_bias);
        CHECK(b.qk_norm == a.qk_norm);
        CHECK(model::param_count(b) == model::param_count(a));
        CHECK(model::param_count(a) == static_cast<double>(model::make_layout(a).num_params));
    }
}

TEST_CASE("model checks of a deck name the keys and where they were set") {
    CHECK(deck_error("model:\n  channels: 100\n  num_heads: 3\n") ==
          "deck.yaml:2: model.channels = 100 is not divisible by model.num_heads = 3 (the head "
          "size is channels / num_heads)");
    CHECK(deck_error("model:\n  vocab_size: 300\n  padded_vocab_size: 256\n") ==
          "deck.yaml:3: model.padded_vocab_size = 256 is smaller than model.vocab_size = 300 (use "
          "0 to round the vocabulary up to a multiple of 128)");
    CHECK(deck_error("parallel:\n  sp: 3\ntrain:\n  seq_len: 48\n") ==
          "deck.yaml:2: model.num_heads = 4 is not divisible by parallel.sp = 3 (Ulysses splits "
          "the heads across the sequence-parallel group)");
    // a key set by --set is named by its --set
    CHECK(deck_error("model:\n  channels: 128\n", {"model.num_heads=5"}) ==
          "deck.yaml:2: model.channels = 128 is not divisible by model.num_heads = 5 (the head "
          "size is channels / num_heads)");
    CHECK(deck_error("", {"model.num_heads=5"}) ==
          "--set model.num_heads=5: model.channels = 128 is not divisible by model.num_heads = 5 "
          "(the head size is channels / num_heads)");
    // the LLaMA family: its MLP size, GQA and kv heads over sp
    CHECK(deck_error("model:\n  type: llama\n") ==
          "deck.yaml:2: model.intermediate_size must be set for model.type llama (the SwiGLU "
          "hidden size, e.g. 14336 for Llama-3-8B)");
    const std::string llama = "model:\n  type: qwen2\n  intermediate_size: 64\n";
    CHECK(deck_error(llama + "  num_kv_heads: 3\n") ==
          "deck.yaml:4: model.num_heads = 4 is not divisible by model.num_kv_heads = 3 (each "
          "key/value head serves num_heads / num_kv_heads query heads)");
    CHECK(deck_error(llama + "  num_kv_heads: 1\nparallel:\n  sp: 2\n") ==
          "deck.yaml:4: model.num_kv_heads = 1 is not divisible by parallel.sp = 2 (Ulysses "
          "splits the key/value heads over the sequence-parallel ranks)");
    CHECK(deck_error(llama + "  num_kv_heads: 2\nparallel:\n  sp: 2\n").empty());
    // the sequence over sp: the same check (model::validate), located at train.seq_len
    CHECK(deck_error("model:\n  num_heads: 8\nparallel:\n  sp: 8\ntrain:\n  seq_len: 60\n") ==
          "deck.yaml:6: train.seq_len = 60 is not divisible by parallel.sp = 8 (Ulysses splits "
          "the sequence across the sequence-parallel group: each rank holds seq_len/sp "
          "positions)");
    // with model.init_from the file decides: the trainer validates what it read; only the
    // sequence split is checked here
    config::Config from_file;
    from_file.model.channels = 100;
    from_file.model.num_heads = 3;
    from_file.model.init_from = "x.bin";
    CHECK_NOTHROW(model::validate_deck(from_file));
    from_file.parallel.sp = 2;
    from_file.train.seq_len = 15;
    CHECK_THROWS_WITH_AS(model::validate_deck(from_file),
                         doctest::Contains("train.seq_len = 15 is not divisible by parallel.sp = "
                                           "2"),
                         core::Error);
}

TEST_CASE("model sizes have upper bounds, checked before anything is allocated") {
    // the deck's key table refuses them first, naming key and bound
    CHECK(has(deck_error("", {"model.num_layers=2147483647"}),
              "model.num_layers = 2147483647 is out of range [1, 65536]"));
    CHECK(has(deck_error("", {"model.vocab_size=2147483647"}),
              "model.vocab_size = 2147483647 is out of range [1, 16777216]"));
    // the same bounds for a model from config.json or an llm.c header (no deck ranges there)
    model::ArchConfig c;
    c.num_layers = 2147483647;
    CHECK(error_of(c) ==
          "model.num_layers = 2147483647 exceeds the limit of 65536 (a model size beyond any "
          "real model; is it a typo?)");
    c = model::ArchConfig{};
    c.vocab_size = c.padded_vocab_size = 2147483647;
    CHECK(has(error_of(c), "model.vocab_size = 2147483647 exceeds the limit of 16777216"));
    c = model::ArchConfig{};
    c.max_seq_len = 1 << 23; // within its bound, but wpe = 2^23 x 768 > 2^31 elements
    CHECK(has(error_of(c), "model.max_seq_len = 8388608 x model.channels = 768 is too large"));
    c = model::ArchConfig{};
    c.padded_vocab_size = c.vocab_size = 1 << 22; // 2^22 x 768 embedding
    CHECK(has(error_of(c), "the embedding must have fewer than 2^31 elements"));
    // every dimension within bounds, the total not: 65536 layers of 12 * 16384^2 weights
    c = model::ArchConfig{};
    c.num_layers = 65536;
    c.channels = 8192;
    c.num_heads = 64;
    CHECK(has(error_of(c), "parameters (model.num_layers = 65536, model.channels = 8192), more "
                           "than the limit of 4.398e+12 (2^42)"));
    // the largest allowed depth lays out (linear in layers)
    c = model::ArchConfig{};
    c.num_layers = 65536;
    c.channels = 8;
    c.num_heads = 2;
    c.vocab_size = c.padded_vocab_size = 128;
    c.max_seq_len = 8;
    CHECK(error_of(c).empty());
    CHECK(model::make_layout(c).num_units() == 65538);
}

TEST_CASE("divisibility over the Ulysses degree is part of validate") {
    model::ArchConfig c;
    CHECK(error_of(c, 4).empty());
    CHECK(has(error_of(c, 5), "model.num_heads = 12 is not divisible by parallel.sp = 5"));
    c.arch = model::Arch::Llama;
    model::apply_arch_defaults(&c);
    c.intermediate_size = 2048;
    c.num_kv_heads = 2;
    CHECK(error_of(c, 2).empty());
    CHECK(has(error_of(c, 4), "model.num_kv_heads = 2 is not divisible by parallel.sp = 4"));
}
