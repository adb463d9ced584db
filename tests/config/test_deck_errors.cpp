// Deck errors: every kind names the file and line (or the --set), the key, and a fix where one
// exists (nearest key, allowed values, range). Checked message by message.
#include <doctest/doctest.h>

#include "deck_test_util.h"

using namespace sof;
using namespace sof::config;
using sof::test::contains;
using sof::test::deck_error;

TEST_CASE("unknown keys name file:line and the nearest key") {
    CHECK(deck_error("train:\n  steps: 3\n  lrr: 0.1\n") ==
          "deck.yaml:3: unknown key 'train.lrr' (did you mean 'train.lr'?)");
    CHECK(deck_error("trian:\n  lr: 1\n") ==
          "deck.yaml:1: unknown key 'trian' (did you mean 'train'?)");
    // the same name in another section
    CHECK(deck_error("model:\n  num_layers: 2\ntrain:\n  weight_decay: 0.1\n") ==
          "deck.yaml:4: unknown key 'train.weight_decay' (did you mean "
          "'optimizer.weight_decay'?)");
    // nothing close: the section's keys are listed
    std::string m = deck_error("train:\n  nope: 1\n");
    CHECK(contains(m, "deck.yaml:2: unknown key 'train.nope' (keys of 'train': batch_size,"));
    // nothing close and no such section: the sections are listed
    m = deck_error("zzzzzz:\n  a: 1\n");
    CHECK(contains(m, "deck.yaml:1: unknown key 'zzzzzz' (sections: data, debug, device,"));
    CHECK(deck_error("model:\n  num_layres: 2\n") ==
          "deck.yaml:2: unknown key 'model.num_layres' (did you mean 'model.num_layers'?)");
    CHECK(deck_error("data:\n  builtin:\n    sed: 2\n") ==
          "deck.yaml:3: unknown key 'data.builtin.sed' (did you mean 'data.builtin.seed'?)");
}

TEST_CASE("wrong types name file:line:key, what was expected and what was given") {
    CHECK(deck_error("train:\n  batch_size: four\n", {}, "type.yaml") ==
          "type.yaml:2: train.batch_size: expected an integer, got 'four'");
    CHECK(deck_error("train:\n  batch_size: 4.5\n") ==
          "deck.yaml:2: train.batch_size: expected an integer, got '4.5'");
    CHECK(deck_error("train:\n  lr: fast\n") ==
          "deck.yaml:2: train.lr: expected a number, got 'fast'");
    CHECK(deck_error("train:\n  lr: .nan\n") ==
          "deck.yaml:2: train.lr: expected a number, got '.nan'");
    CHECK(deck_error("train:\n  steps:\n") ==
          "deck.yaml:2: train.steps: expected an integer, got nothing");
    CHECK(deck_error("model:\n  recompute: maybe\n") ==
          "deck.yaml:2: model.recompute: expected true or false, got 'maybe'");
    CHECK(deck_error("data:\n  seed: -1\n") ==
          "deck.yaml:2: data.seed: expected a non-negative integer, got '-1'");
    CHECK(deck_error("train:\n  schedule: cosin\n") ==
          "deck.yaml:2: train.schedule: expected one of constant|linear|cosine|wsd, got 'cosin' "
          "(did you mean 'cosine'?)");
    CHECK(deck_error("offload:\n  weights: streaming\n") ==
          "deck.yaml:2: offload.weights: expected one of stationary|flow|auto, got 'streaming'");
    CHECK(deck_error("runtime:\n  log_level: verbose\n") ==
          "deck.yaml:2: runtime.log_level: expected one of quiet|info|debug, got 'verbose'");
    CHECK(deck_error("offload:\n  gpu_tail_buckets: many\n") ==
          "deck.yaml:2: offload.gpu_tail_buckets: expected an integer or 'auto', got 'many'");
    CHECK(deck_error("train:\n  lr: [1, 2]\n") ==
          "deck.yaml:2: train.lr: expected a number, got a list");
    CHECK(deck_error("train:\n  lr:\n    a: 1\n") ==
          "deck.yaml:2: train.lr: expected a number, got a mapping");
    CHECK(deck_error("debug:\n  inject_nonfinite_steps: [1, x]\n") ==
          "deck.yaml:2: debug.inject_nonfinite_steps: expected a list of integers, got 'x' in it");
    CHECK(deck_error("train:\n  steps: 99999999999\n") ==
          "deck.yaml:2: train.steps = 99999999999 does not fit (allowed -2147483648..2147483647)");
    // a section that is not a mapping
    CHECK(contains(deck_error("train: 5\n"),
                   "deck.yaml:1: train is a section: expected a mapping of its keys (batch_size,"));
    // a deck that is not a mapping at all
    CHECK(contains(deck_error("- a\n- b\n"), "deck.yaml:1: a deck is a mapping of sections"));
}

TEST_CASE("out-of-range values name file:line:key and the range") {
    CHECK(deck_error("optimizer:\n  beta1: 1.5\n", {}, "range.yaml") ==
          "range.yaml:2: optimizer.beta1 = 1.5 is out of range [0, 1)");
    CHECK(deck_error("optimizer:\n  beta2: 1\n") ==
          "deck.yaml:2: optimizer.beta2 = 1 is out of range [0, 1)");
    CHECK(deck_error("optimizer:\n  eps: 0\n") ==
          "deck.yaml:2: optimizer.eps = 0 is out of range (must be > 0)");
    CHECK(deck_error("train:\n  batch_size: 0\n") ==
          "deck.yaml:2: train.batch_size = 0 is out of range (must be >= 1)");
    CHECK(deck_error("train:\n  steps: -5\n") ==
          "deck.yaml:2: train.steps = -5 is out of range (must be >= 1)");
    CHECK(deck_error("train:\n  lr: -0.1\n") ==
          "deck.yaml:2: train.lr = -0.1 is out of range (must be >= 0)");
    CHECK(deck_error("offload:\n  bucket_mb: 0\n") ==
          "deck.yaml:2: offload.bucket_mb = 0 is out of range (must be > 0)");
    CHECK(deck_error("offload:\n  gpu_tail_buckets: -2\n") ==
          "deck.yaml:2: offload.gpu_tail_buckets = -2 is out of range (must be >= 0)");
    CHECK(deck_error("offload:\n  interleave_k: 0\n") ==
          "deck.yaml:2: offload.interleave_k = 0 is out of range (must be >= 1)");
    CHECK(deck_error("parallel:\n  sp: 0\n") ==
          "deck.yaml:2: parallel.sp = 0 is out of range (must be >= 1)");
    CHECK(deck_error("parallel:\n  zero_stage: 2\n") ==
          "deck.yaml:2: parallel.zero_stage = 2 is not allowed (use 0 or 3)");
    CHECK(deck_error("debug:\n  inject_nonfinite_steps: [2, -1]\n") ==
          "deck.yaml:2: debug.inject_nonfinite_steps = -1 is out of range (must be >= 0)");
}

TEST_CASE("YAML syntax errors give file:line:column") {
    CHECK(deck_error("train:\n  steps: [1, 2\n", {}, "syntax.yaml") ==
          "syntax.yaml:3:1: YAML syntax error: end of sequence flow not found");
    std::string m = deck_error("train:\n  lr: 1\n   steps: 2\n");
    CHECK(contains(m, "deck.yaml:3:"));
    CHECK(contains(m, "YAML syntax error"));
    CHECK(deck_error("train:\n\tlr: 1\n") ==
          "deck.yaml:2:4: YAML syntax error: illegal map value (indent with spaces: YAML does not "
          "allow tabs in indentation)");
    m = deck_error("train:\n  lr: *nothere\n");
    CHECK(contains(m, "deck.yaml:2:"));
}

TEST_CASE("duplicate keys are errors naming both lines") {
    CHECK(deck_error("train:\n  steps: 3\n  lr: 1\n  steps: 4\n") ==
          "deck.yaml:4: duplicate key 'train.steps' (first set at deck.yaml:2)");
    CHECK(deck_error("train:\n  steps: 3\ntrain.steps: 4\n") ==
          "deck.yaml:3: duplicate key 'train.steps' (first set at deck.yaml:2)");
}

TEST_CASE("override errors name the --set") {
    CHECK(deck_error("", {"train.nope=1"}) ==
          "--set train.nope=1: unknown key 'train.nope' (keys of 'train': batch_size, seq_len, "
          "grad_accum, global_batch, steps, stop_after, lr, min_lr, warmup_steps, schedule, "
          "decay_fraction, grad_clip, eval_every, eval_batches, log_every, seed, checkpoint_every, "
          "checkpoint_dir, keep_checkpoints, resume, resume_convert_state, metrics, dtype)");
    CHECK(deck_error("", {"train.stpes=1"}) ==
          "--set train.stpes=1: unknown key 'train.stpes' (did you mean 'train.steps'?)");
    CHECK(deck_error("", {"train.steps=abc"}) ==
          "--set train.steps=abc: expected an integer, got 'abc'");
    CHECK(deck_error("", {"optimizer.beta1=1.5"}) ==
          "--set optimizer.beta1=1.5: optimizer.beta1 = 1.5 is out of range [0, 1)");
    CHECK(deck_error("", {"train.schedule=linar"}) ==
          "--set train.schedule=linar: expected one of constant|linear|cosine|wsd, got 'linar' "
          "(did you mean 'linear'?)");
    CHECK(deck_error("", {"train.lr"}) ==
          "--set train.lr: expected key=value (e.g. --set train.lr=3e-4)");
    CHECK(contains(deck_error("", {"train=1"}),
                   "--set train=1: 'train' is a section, not a key; set one of its keys"));
    CHECK(deck_error("", {"debug.inject_nonfinite_steps=[1,y]"}) ==
          "--set debug.inject_nonfinite_steps=[1,y]: expected a list of integers, got 'y' in it");
    CHECK(deck_error("", {"train.steps="}) == "--set train.steps=: expected an integer, got ''");
}

TEST_CASE("cross-field checks name the keys and where they were set") {
    CHECK(deck_error("model:\n  max_seq_len: 32\ntrain:\n  seq_len: 64\n") ==
          "deck.yaml:4: train.seq_len = 64 exceeds model.max_seq_len = 32 (the model has "
          "positions for max_seq_len tokens)");
    CHECK(deck_error("train:\n  lr: 0.001\n  min_lr: 0.01\n") ==
          "deck.yaml:3: train.min_lr = 0.01 is larger than train.lr = 0.001");
    CHECK(deck_error("train:\n  checkpoint_every: 5\n") ==
          "deck.yaml:2: train.checkpoint_every = 5 needs train.checkpoint_dir (where to write "
          "them)");
    CHECK(deck_error("train:\n  resume: auto\n") ==
          "deck.yaml:2: train.resume = auto needs train.checkpoint_dir (where to look for the "
          "newest checkpoint)");
    // train.seq_len over parallel.sp: model::validate_deck, with the heads (test_model_config)
    CHECK_NOTHROW(load_deck_from_string(
        "model:\n  num_heads: 8\nparallel:\n  sp: 8\ntrain:\n  seq_len: 60\n", "ok", {}));
    CHECK(deck_error("model:\n  offload_checkpoints: true\n") ==
          "deck.yaml:2: model.offload_checkpoints: true keeps the block inputs saved for "
          "recompute in host memory: it needs model.recompute: true");
    CHECK_NOTHROW(load_deck_from_string("model:\n  offload_checkpoints: true\n  recompute: true\n",
                                        "ok", {}));
    CHECK(deck_error("model:\n  device_checkpoints: 2\n") ==
          "deck.yaml:2: model.device_checkpoints = 2 keeps that many of the offloaded "
          "checkpoints in device memory: it needs model.offload_checkpoints: true");
    CHECK(deck_error("model:\n  num_layers: 4\n  recompute: true\n  offload_checkpoints: true\n"
                     "  device_checkpoints: 4\n") ==
          "deck.yaml:5: model.device_checkpoints = 4 exceeds the 3 block inputs saved for "
          "recompute (model.num_layers - 1)");
    CHECK(contains(deck_error("data:\n  builtin:\n    val_tokens: 100\n"),
                   "deck.yaml:3: data.builtin.val_tokens = 100 is less than one batch "
                   "(train.batch_size * train.seq_len + 1 = 257)"));
    // the model's own sizes and divisibility are model::validate's (tests/model/
    // test_model_config.cpp): the deck loads, model::validate_deck refuses it
    CHECK_NOTHROW(load_deck_from_string("model:\n  channels: 100\n  num_heads: 3\n", "ok", {}));
}

TEST_CASE("a NUL byte in a deck is named by line and column, not as a bad escape") {
    // before: "unknown escape character: 4" (yaml-cpp ends the string at the NUL)
    const std::string text = std::string("train:\n  steps: 3\n  lr: 1e-3") + '\0' + "4\n";
    CHECK(deck_error(text) == "deck.yaml:3:11: the deck contains a NUL byte (0x00): a deck is "
                              "YAML text; is this a binary or corrupted file?");
}

TEST_CASE("values where AdamW's decay breaks are refused; values far outside usual ranges warn") {
    // before: both loaded silently (weight_decay 9.2e18 turns every decayed weight into -inf)
    CHECK(deck_error("optimizer:\n  weight_decay: 9.2e18\n") ==
          "deck.yaml:2: train.lr x optimizer.weight_decay = 0.001 x 9.2e+18 = 9.2e+15: AdamW "
          "multiplies every decayed weight by 1 - lr x weight_decay each step, which must stay "
          "above 0 (usual weight_decay: 0 to 0.1)");
    CHECK(contains(deck_error("optimizer:\n  type: adam\n  weight_decay: 9.2e18\n"),
                   "overflows fp32"));
    // lr 2.1e9 without decay still steps: it loads, with a warning naming where it was set, the
    // value and the usual range
    Config c = load_deck_from_string("train:\n  lr: 2.1e9\n", "d.yaml", {});
    std::vector<std::string> w = deck_warnings(c);
    REQUIRE(w.size() == 1);
    CHECK(w[0] == "d.yaml:2: train.lr = 2.1e+09 is far outside the usual range (1e-6 to 1e-2; "
                  "training will diverge): is it a typo?");
    c = load_deck_from_string("optimizer:\n  weight_decay: 5\n", "d.yaml", {});
    w = deck_warnings(c);
    REQUIRE(w.size() == 1);
    CHECK(contains(w[0], "d.yaml:2: optimizer.weight_decay = 5 is far outside the usual range"));
    // the usual values say nothing
    CHECK(deck_warnings(load_deck_from_string("train:\n  lr: 3e-4\n", "d.yaml", {})).empty());
}
