// `superoffload plan DECK [--hardware FILE]` (cmd_plan linked in directly): prints describe() and
// the resolved deck values; bad arguments are Usage errors.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "../../app/commands.h"
#include "core/error.h"
#include "run_command.h"

namespace {

// Runs cmd_plan with `args`, returning what it printed on stdout.
std::string run_plan(std::vector<std::string> args) {
    return sof::test::run_command(sof::app::cmd_plan, std::move(args), "cmd_plan_out.txt");
}

} // namespace

TEST_CASE("plan command: 1.5B deck on gh200") {
    std::string src = SOF_SOURCE_DIR;
    std::string out = run_plan({src + "/inputs/gpt2-1.5b-offload.yaml", "--hardware",
                                src + "/inputs/hardware/gh200.yaml"});
    CHECK(out.find("plan on gh200") != std::string::npos);
    CHECK(out.find("recommended bucket_mb: 64") != std::string::npos);
    CHECK(out.find("deck values: offload.weights=stationary") != std::string::npos);
    // --set still works next to --hardware
    out = run_plan({src + "/inputs/gpt2-1.5b-offload.yaml", "--set", "offload.gpu_tail_buckets=3",
                    "--hardware=" + src + "/inputs/hardware/gh200.yaml"});
    CHECK(out.find("offload.gpu_tail_buckets=3") != std::string::npos);
    // without --hardware: the built-in host profile
    out = run_plan({src + "/inputs/tiny.yaml"});
    CHECK(out.find("plan on host (built-in)") != std::string::npos);
}

TEST_CASE("plan command: usage and file errors") {
    std::string src = SOF_SOURCE_DIR;
    try {
        run_plan({src + "/inputs/tiny.yaml", "--hardwar", "x"});
        FAIL("expected a usage error");
    } catch (const sof::core::Error& e) {
        CHECK(e.kind() == sof::core::ErrorKind::Usage);
    }
    try {
        run_plan({src + "/inputs/tiny.yaml", "--hardware", "/nonexistent/hw.yaml"});
        FAIL("expected an Io error");
    } catch (const sof::core::Error& e) {
        CHECK(e.kind() == sof::core::ErrorKind::Io);
        CHECK(std::string(e.what()).find("/nonexistent/hw.yaml") != std::string::npos);
    }
}

TEST_CASE("plan command: the GH200 LLaMA/Qwen decks plan without their token shards") {
    // the decks read data/llama3/*.bin etc., which a clean checkout does not have: plan needs
    // only shapes and policies
    const std::string src = SOF_SOURCE_DIR, hw = src + "/inputs/hardware/gh200.yaml";
    std::string out = run_plan({src + "/inputs/qwen3-14b-gh200.yaml", "--hardware", hw});
    CHECK(out.find("deck values: offload.weights=stationary") != std::string::npos);
    out = run_plan({src + "/inputs/llama3-8b-gh200.yaml", "--hardware", hw});
    CHECK(out.find("deck values: offload.weights=stationary") != std::string::npos);
    out = run_plan({src + "/inputs/llama3-70b-gh200x4.yaml", "--hardware", hw, "--ranks", "4"});
    CHECK(out.find("4 ranks, ZeRO-3") != std::string::npos);
}

TEST_CASE("plan command: train.global_batch is resolved for --ranks before planning") {
    // the engine of a global_batch run accumulates global_batch / (ranks x batch_size)
    // micro-batches; the plan must size that geometry (weight flow with accumulation keeps pinned
    // fp32 grads, no grad ring), not the deck's batch_size x grad_accum
    std::string src = SOF_SOURCE_DIR;
    const std::vector<std::string> deck = {src + "/inputs/tiny.yaml", "--set",
                                           "offload.weights=flow", "--set",
                                           "train.global_batch=64"};
    std::string out = run_plan(deck); // one rank: 8 x 8
    CHECK(out.find("batch: train.global_batch = 64 over 1 data-parallel rank(s): 64 sequences "
                   "per rank = batch_size 8 x grad_accum 8") != std::string::npos);
    CHECK(out.find("4096 tokens per step") != std::string::npos);
    CHECK(out.find("offload.flow_grads=host") != std::string::npos);
    CHECK(out.find("accumulate over the step's 8 micro-batches") != std::string::npos);
    CHECK(out.find("a ring of") == std::string::npos);
    std::vector<std::string> eight = deck;
    eight.insert(eight.end(), {"--ranks", "8"}); // 8 per rank: no accumulation
    out = run_plan(eight);
    CHECK(out.find("512 tokens per step") != std::string::npos);
    CHECK(out.find("micro-batches") == std::string::npos);
    std::vector<std::string> five = deck;
    five.insert(five.end(), {"--ranks", "5"});
    CHECK_THROWS_WITH_AS(run_plan(five), doctest::Contains("multiple of 5"), sof::core::Error);
}

TEST_CASE("plan command: model.init_from's config.json decides the model (issue 26)") {
    // the bug: `plan` with --set model.init_from=<a Qwen3-14B directory> priced the deck's own
    // 0.001B model and said it fits. The directory holds config.json only (no weights needed).
    const std::string src = SOF_SOURCE_DIR;
    const std::string own = run_plan({src + "/inputs/tiny.yaml"});
    CHECK(own.find("model 0.001 B params") != std::string::npos);
    const std::string hf = src + "/inputs/hf/qwen3-14b";
    const std::string out = run_plan({src + "/inputs/tiny.yaml", "--set", "model.init_from=" + hf});
    CHECK(out.find("model 14.768 B params") != std::string::npos);
    CHECK(out.find("model 0.001 B params") == std::string::npos);
    CHECK(out.find("model: " + hf + "/config.json") != std::string::npos);
}
