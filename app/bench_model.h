// `superoffload bench model`: CPU forward+backward of the LLaMA block against the GPT-2 block of
// equal FLOPs (MHA, I = 8C/3), paired, per unit. App code: a benchmark is not part of lib/.
#pragma once

#include <string>

namespace sof::app {

struct BenchModelOptions {
    int channels = 768;         // C (both models)
    int heads = 12;             // NH (both models)
    int kv_heads = 0;           // LLaMA NKV; 0 = heads (MHA: the GPT-2 attention FLOPs)
    int intermediate = 0;       // LLaMA I; 0 = 8C/3 rounded to 8 (the GPT-2 MLP FLOPs)
    std::string arch = "llama"; // llama | qwen2 | qwen3
    int layers = 2;             // L (both)
    int batch = 4;              // B
    int seq = 256;              // T
    int pairs = 5;              // timed GPT-2/LLaMA pairs after one warm-up each (median reported)
    int threads = 0;            // OpenMP threads; 0 = default
    bool json = false;
};

// Parses `model [--channels C] [--heads NH] [--kv-heads K] [--intermediate I] [--arch A]
// [--layers L] [--batch B] [--seq T] [--pairs K] [--threads N] [--json]`; Usage errors name the
// bad argument.
BenchModelOptions parse_bench_model_args(int argc, char** argv);

// Runs the benchmark and returns the report (text or JSON per options).
std::string bench_model(const BenchModelOptions& o);

} // namespace sof::app
