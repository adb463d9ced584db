// `superoffload bench model`: times the block units (acquire..release in forward and backward) of
// a GPT-2 and a LLaMA-family model on the same batch, alternating, and compares time per FLOP.
#include "bench_model.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "model/model.h"

namespace sof::app {

using namespace sof::model;

namespace {

using Clock = std::chrono::steady_clock;

// Flat weights that add up the wall time each block unit (1..L) is held, forward and backward.
class TimedWeights : public WeightSource {
  public:
    TimedWeights(const ParamLayout& l, const float* p) : l_(l), p_(p) {}
    const float* acquire(int u, Pass) override {
        t0_ = Clock::now();
        return p_ + l_.unit_begin[static_cast<size_t>(u)];
    }
    void release(int u, Pass) override {
        if (u >= 1 && u <= l_.cfg.num_layers)
            block_seconds += std::chrono::duration<double>(Clock::now() - t0_).count();
    }
    double block_seconds = 0;

  private:
    const ParamLayout& l_;
    const float* p_;
    Clock::time_point t0_;
};

// Forward+backward FLOPs of one block for N tokens of a sequence of T: 6 per matmul weight and
// token, plus attention (12*T*NH*hd per token, as flops_per_token counts it).
double block_flops(const ParamLayout& l, int N, int T) {
    const double w = static_cast<double>(l.unit_begin[2] - l.unit_begin[1]);
    return (6.0 * w + 12.0 * T * l.cfg.q_dim()) * N;
}

struct Side {
    ArchConfig cfg;
    std::unique_ptr<Model> model;
    std::vector<float> params, grads;
    std::vector<double> seconds;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

BenchModelOptions parse_bench_model_args(int argc, char** argv) {
    BenchModelOptions o;
    const char* usage = "usage: superoffload bench model [--channels C] [--heads NH] "
                        "[--kv-heads K] [--intermediate I] [--arch llama|qwen2|qwen3] "
                        "[--layers L] [--batch B] [--seq T] [--pairs K] [--threads N] [--json]";
    if (argc < 1 || std::strcmp(argv[0], "model") != 0)
        SOF_FAIL(Usage, "bench: expected the benchmark name 'model' first\n%s", usage);
    CliParser p({usage, "bench model: unknown option '%s'",
                 [](const std::string& opt) { return "bench model: " + opt + " needs a value"; }});
    // the integer options and where each goes
    const std::vector<std::pair<const char*, int*>> ints = {
        {"--channels", &o.channels}, {"--heads", &o.heads},
        {"--kv-heads", &o.kv_heads}, {"--intermediate", &o.intermediate},
        {"--layers", &o.layers},     {"--batch", &o.batch},
        {"--seq", &o.seq},           {"--pairs", &o.pairs},
        {"--threads", &o.threads}};
    std::vector<std::string> text(ints.size());
    for (size_t i = 0; i < ints.size(); i++)
        p.option(ints[i].first, &text[i]);
    std::string arch;
    p.option("--arch", &arch);
    p.flag("--json", &o.json);
    const std::vector<std::string> extra = p.parse(argc - 1, argv + 1);
    if (!extra.empty()) p.fail("bench model: unknown option '" + extra[0] + "'");
    if (p.count("--arch")) {
        Arch x;
        if (!parse_arch(arch, &x) || x == Arch::Gpt2)
            p.fail("bench model: --arch '" + arch + "' must be llama, qwen2 or qwen3");
        o.arch = arch;
    }
    for (size_t i = 0; i < ints.size(); i++) {
        if (!p.count(ints[i].first)) continue;
        const std::string& v = text[i];
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 0 || n > 1000000)
            p.fail(core::strfmt("bench model: %s '%s' must be an integer in [0, 1000000]",
                                ints[i].first, v.c_str()));
        *ints[i].second = static_cast<int>(n);
    }
    o.pairs = std::max(1, o.pairs);
    return o;
}

std::string bench_model(const BenchModelOptions& o) {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const int B = o.batch, T = o.seq, N = B * T;
    Side s[2];
    s[0].cfg.arch = Arch::Gpt2;
    s[1].cfg.arch = Arch::Llama;
    parse_arch(o.arch, &s[1].cfg.arch);
    for (Side& x : s) {
        apply_arch_defaults(&x.cfg);
        x.cfg.num_layers = o.layers;
        x.cfg.num_heads = o.heads;
        x.cfg.channels = o.channels;
        x.cfg.max_seq_len = T;
        x.cfg.vocab_size = 256; // small: the benchmark times the block units
        x.cfg.padded_vocab_size = 256;
    }
    s[1].cfg.num_kv_heads = o.kv_heads;
    s[1].cfg.intermediate_size =
        o.intermediate > 0 ? o.intermediate : (8 * o.channels / 3 + 7) / 8 * 8;
    s[1].cfg.tie_embeddings = false;
    std::vector<int> in(static_cast<size_t>(N)), tg(static_cast<size_t>(N));
    for (int i = 0; i < N; i++) {
        in[static_cast<size_t>(i)] = (i * 31 + 7) % 256;
        tg[static_cast<size_t>(i)] = (i * 17 + 3) % 256;
    }
    for (Side& x : s) {
        x.model = make_model(x.cfg, ModelOptions{}, B, T);
        const ParamLayout& l = x.model->layout();
        x.params.resize(l.num_params);
        x.grads.assign(l.num_params, 0.0f);
        init_params(l, x.params.data(), 0.02f, 1);
    }
    auto once = [&](Side& x) {
        TimedWeights w(x.model->layout(), x.params.data());
        FlatGrads g(x.model->layout(), x.grads.data());
        x.model->forward(w, in.data(), tg.data(), B, T);
        x.model->backward(w, g, 1.0f / static_cast<float>(N));
        return w.block_seconds / x.cfg.num_layers; // per block unit
    };
    once(s[0]); // warm-up
    once(s[1]);
    for (int k = 0; k < o.pairs; k++) {
        for (int j = 0; j < 2; j++) { // alternate which side runs first
            Side& x = s[(k + j) % 2];
            x.seconds.push_back(once(x));
        }
    }
    double sec[2], flops[2], gfs[2];
    for (int j = 0; j < 2; j++) {
        sec[j] = median(s[j].seconds);
        flops[j] = block_flops(s[j].model->layout(), N, T);
        gfs[j] = flops[j] / sec[j] * 1e-9;
    }
    // > 1: the LLaMA block takes longer per FLOP than the GPT-2 block
    const double ratio = (sec[1] / flops[1]) / (sec[0] / flops[0]);
    const ArchConfig& lc = s[1].cfg;
    if (o.json)
        return core::strfmt(
            "{\"threads\": %d, \"B\": %d, \"T\": %d, \"C\": %d, \"NH\": %d, \"pairs\": %d,\n"
            " \"gpt2\": {\"block_seconds\": %.6f, \"block_gflop\": %.4f, \"gflops\": %.3f},\n"
            " \"%s\": {\"NKV\": %d, \"I\": %d, \"block_seconds\": %.6f, \"block_gflop\": %.4f, "
            "\"gflops\": %.3f},\n \"time_per_flop_ratio\": %.4f}\n",
            omp_get_max_threads(), B, T, o.channels, o.heads, o.pairs, sec[0], flops[0] * 1e-9,
            gfs[0], o.arch.c_str(), lc.kv_heads(), lc.ffn_dim(), sec[1], flops[1] * 1e-9, gfs[1],
            ratio);
    return core::strfmt(
        "bench model: one block unit, forward + backward, B=%d T=%d C=%d NH=%d, %d threads, "
        "median of %d pairs\n"
        "  gpt2   %.2f GFLOP in %8.2f ms  %6.2f GFLOP/s\n"
        "  %-6s %.2f GFLOP in %8.2f ms  %6.2f GFLOP/s  (NKV %d, I %d)\n"
        "  time per FLOP, %s / gpt2: %.3f\n",
        B, T, o.channels, o.heads, omp_get_max_threads(), o.pairs, flops[0] * 1e-9, sec[0] * 1e3,
        gfs[0], o.arch.c_str(), flops[1] * 1e-9, sec[1] * 1e3, gfs[1], lc.kv_heads(), lc.ffn_dim(),
        o.arch.c_str(), ratio);
}

} // namespace sof::app
