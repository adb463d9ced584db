// `superoffload generate` on the GPU (label gpu; exit 77 = skipped without a visible GPU): a tiny
// Llama's KV-cache decoding through the one transformer driver on the CUDA device against the
// CPU twins (logits of the prefill and of every decode step, greedy ids), and the command with
// --device cuda against --device host on the same exported model.
#include <doctest/doctest.h>

#include "case_names.h"  // each case named in the log before it runs
#include "gpu_as_host.h" // SOF_TEST_GPU_AS_HOST=1: the "cuda" runs on the host device

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/hf.h"
#include "config/config.h"
#include "device/device.h"
#include "e2e/cli.h"
#include "model/model.h"
#include "model/sample.h"

#if defined(SOF_HAVE_CUDA) && __has_include("device/cuda_device.h")
#include "device/cuda_device.h"
#define SOF_TEST_HAVE_CUDA 1
#endif

using namespace sof;
using test::gpu;
using test::gpu_as_host;

namespace {

// Head dim 32 (a size the CUDA attention is built for), GQA, llama3 RoPE scaling, untied head.
model::ArchConfig tiny_llama() {
    model::ArchConfig c;
    c.arch = model::Arch::Llama;
    model::apply_arch_defaults(&c);
    c.max_seq_len = 64;
    c.vocab_size = 300;
    c.padded_vocab_size = 320;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.channels = 128;
    c.intermediate_size = 192;
    c.tie_embeddings = false;
    c.rope_theta = 500000;
    c.rope_scaling.type = model::RopeScalingType::Llama3;
    c.rope_scaling.factor = 8;
    c.rope_scaling.original_max_position = 16;
    return c;
}

// Weights with std 0.2 (not GPT-2's 0.02): logits far from uniform, so the greedy choice has a
// margin that fp32 summation-order differences cannot cross (measured and printed below).
std::vector<float> weights(const model::ParamLayout& lay) {
    std::vector<float> p(lay.num_params);
    model::init_params(lay, p.data(), 0.2f, 19);
    return p;
}

const std::vector<int> kPrompt = {5, 17, 250, 3, 99, 42};

// max |a - b| / max |b| over the first V of each Vp row
double rel_err(const std::vector<float>& a, const std::vector<float>& b, int V, int Vp) {
    double e = 0, m = 0;
    for (size_t r = 0; r < b.size() / static_cast<size_t>(Vp); r++)
        for (int v = 0; v < V; v++) {
            const size_t i = r * Vp + v;
            e = std::max(e, static_cast<double>(std::fabs(a[i] - b[i])));
            m = std::max(m, static_cast<double>(std::fabs(b[i])));
        }
    return e / std::max(m, 1e-30);
}

std::vector<int> json_ids(const std::string& out, const std::string& key) {
    const size_t k = out.find("\"" + key + "\": [");
    REQUIRE(k != std::string::npos);
    std::vector<int> ids;
    size_t i = out.find('[', k) + 1;
    while (i < out.size() && out[i] != ']') {
        size_t j = i;
        ids.push_back(std::stoi(out.substr(i), &j));
        i += j;
        if (out[i] == ',') i++;
    }
    return ids;
}

} // namespace

TEST_CASE("CUDA decode with a KV cache equals the CPU twins; greedy ids equal") {
    const model::ArchConfig cfg = tiny_llama();
    const model::ParamLayout lay = model::make_layout(cfg);
    const std::vector<float> p = weights(lay);
    const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size, max_T = cfg.max_seq_len;

    config::DeviceConfig dc;
    dc.type = gpu_as_host() ? config::DeviceType::Host : config::DeviceType::Cuda;
    const std::unique_ptr<device::Device> dev = device::make_device(dc, 0, nullptr);
    const std::unique_ptr<device::Stream> stream = dev->create_stream("test compute");
    float* dw = static_cast<float*>(dev->alloc(p.size() * 4, "weights"));
    dev->copy(dw, p.data(), p.size() * 4, device::CopyKind::HostToDevice, *stream);
    dev->synchronize(*stream);
    {
        model::ModelOptions o;
        o.device = dev.get();
        o.stream = stream.get();
        const auto gpu = model::make_model(cfg, o, 1, max_T);
        const auto cpu = model::make_model(cfg, {}, 1, max_T);
        model::FlatWeights wg(lay, dw), wc(lay, p.data());

        // fp32 on both (cuBLASLt with fp32 compute, no TF32): only the summation order differs,
        // ~1e-7 relative per dot product, ~1e-6 on the logits of 2 layers; 1e-4 leaves 100x room
        // and a wrong op (scale, RoPE row, cache row) moves the logits by > 1e-2.
        gpu->decode(wg, kPrompt.data(), static_cast<int>(kPrompt.size()), 0);
        cpu->decode(wc, kPrompt.data(), static_cast<int>(kPrompt.size()), 0);
        double worst = rel_err(gpu->logits(), cpu->logits(), V, Vp);
        CHECK(worst < 1e-4);
        // one token at a time, the CPU's greedy choice fed to both (the same cache contents)
        double margin = 1e30;
        int pos = static_cast<int>(kPrompt.size());
        for (int step = 0; step < 20; step++, pos++) {
            const std::vector<float> lc = cpu->logits();
            const float* last = lc.data() + (lc.size() / Vp - 1) * Vp;
            std::vector<float> row(last, last + V);
            std::vector<float> s = row;
            std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
            margin = std::min(margin, static_cast<double>(s[0] - s[1]));
            const int tok =
                static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
            gpu->decode(wg, &tok, 1, pos);
            cpu->decode(wc, &tok, 1, pos);
            worst = std::max(worst, rel_err(gpu->logits(), cpu->logits(), V, Vp));
        }
        MESSAGE("CUDA vs CPU decode: worst relative logit difference "
                << worst << ", smallest top-2 gap " << margin);
        CHECK(worst < 1e-4);

        // greedy generation through model::generate on each
        model::SamplingParams g;
        g.temperature = 0.0f;
        const model::GenerateResult rg = model::generate(*gpu, wg, kPrompt, 24, max_T, g, 0, {});
        const model::GenerateResult rc = model::generate(*cpu, wc, kPrompt, 24, max_T, g, 0, {});
        CHECK(rg.ids.size() == 24);
        CHECK(rg.ids == rc.ids);
        // not a degenerate model: the greedy continuation is not one token repeated
        CHECK(std::count(rc.ids.begin(), rc.ids.end(), rc.ids[0]) < 24);
    }
    dev->free(dw);
}

TEST_CASE("superoffload generate --device cuda gives the --device host ids") {
    const model::ArchConfig cfg = tiny_llama();
    const model::ParamLayout lay = model::make_layout(cfg);
    const std::vector<float> p = weights(lay);
    const std::string dir = test::scratch_dir("generate_cuda");
    ckpt::HfExportOptions o;
    o.dtype = "fp32";
    ckpt::export_hf(dir + "/hf", lay, p.data(), o);
    std::string ids;
    for (int t : kPrompt) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(t);
    }
    const std::string args = "generate --hf hf --prompt-ids " + ids +
                             " --temperature 0 --max-tokens 24 --ignore-eos --json --device ";
    const test::RunResult host = test::run_superoffload(args + "host", dir);
    const test::RunResult cuda = test::run_superoffload(args + gpu(), dir);
    INFO(host.output);
    INFO(cuda.output);
    REQUIRE(host.exit_code == 0);
    REQUIRE(cuda.exit_code == 0);
    CHECK(cuda.output.find(std::string("\"device\": \"") + gpu() + "\"") != std::string::npos);
    CHECK(host.output.find("\"device\": \"host\"") != std::string::npos);
    const std::vector<int> a = json_ids(host.output, "ids"), b = json_ids(cuda.output, "ids");
    CHECK(a.size() == 24);
    CHECK(a == b);
}

int main(int argc, char** argv) {
#ifdef SOF_TEST_HAVE_CUDA
    if (!gpu_as_host() && device::cuda_device_count() == 0) {
        std::printf("SKIPPED: no usable CUDA device\n");
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
#else
    (void)argc, (void)argv;
    std::printf("SKIPPED: a build without CUDA\n");
    return 77;
#endif
}
