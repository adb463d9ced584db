// Adam kernel benchmark: the plugin's step against the memory ceiling (the best of several access
// strategies for Adam's streams on the same buffers), paired. Used by `superoffload bench adam`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace sof::bench {

// Default --params: 32M parameters move ~1 GB per fp32 step, far beyond any cache (memory-bound).
constexpr int64_t kBenchAdamDefaultParams = int64_t{32} << 20;
// Elements per scale of the q8 formats timed (optimizer.state_block's default).
constexpr int32_t kBenchAdamQ8Block = 256;

// What `superoffload bench adam` measures (its command line: app/bench_adam_args.h).
struct BenchAdamOptions {
    int64_t params = kBenchAdamDefaultParams; // number of parameters
    std::string plugin = "auto";
    std::string plugin_dir; // empty = plugin_dir("") resolution
    int threads = 0;        // OpenMP threads for ceiling and plugin; 0 = omp default
    bool lowp_copy = true;  // write the bf16 param copy in the same pass (30 B/param, else 28)
    int reps = 0;           // stage-1 calibration passes per ceiling strategy; 0 = auto (1-10)
    int pairs = 0;          // ceiling/plugin pairs timed after calibration; 0 = auto (11)
    bool json = false;      // print JSON instead of the table
};

// One ceiling strategy's calibration result.
struct BenchCeilingTry {
    std::string strategy; // CeilingStrategy::name()
    double seconds = 0;   // median of its calibration passes
};

// One state format's step, timed in every pair next to the fp32 one (fp32 grads unless named).
struct BenchFormatResult {
    std::string format;            // "fp32", "bf16 grads", "bf16 moments", "q8 moments", ...
    double bytes_per_param = 0;    // memory traffic of the step per parameter (reads + writes)
    double seconds = 0;            // median over the pairs of one step over all params
    double params_per_s = 0;       // from the median
    double ns_per_param = 0;       // per thread-team: seconds / params
    double speedup = 0;            // median over the pairs of t(fp32) / t(this format)
    double bandwidth_fraction = 0; // median over pairs of (bytes/t) / the ceiling's (bytes/t)
};

struct BenchModeResult {
    std::string mode;                   // "in_place" or "separate"
    std::string ceiling_strategy;       // fastest in calibration (median), used in the pairs
    std::string ceiling_strategy2;      // second fastest, also run in every pair
    std::vector<BenchCeilingTry> tries; // every strategy, calibration order
    double ceiling_seconds = 0; // median over the pairs of the faster finalist's pass (all params)
    double step_seconds = 0;    // median over the pairs of one plugin step over all params
    double ceiling_best_seconds = 0;
    double step_best_seconds = 0;
    double ceiling_params_per_s = 0; // from the medians
    double ceiling_gbps = 0;         // GB/s (1e9 bytes) moved by the ceiling
    double params_per_s = 0;
    double gbps = 0;
    double fraction_of_ceiling = 0; // median over pairs of t_ceiling / t_step (same minute)
    double fraction_min = 0, fraction_max = 0;
    // the same step with bf16 grads, and with bf16 grads and bf16 moments, timed in every pair
    // next to the fp32 step: medians, and the median per-pair speedup over fp32 grads (> 1 faster)
    double bf16_grads_seconds = 0, bf16_grads_params_per_s = 0, bf16_grads_speedup = 0;
    double bf16_state_seconds = 0, bf16_state_params_per_s = 0, bf16_state_speedup = 0;
    // every state format (fp32 first), same pairs; the bandwidth is the ceiling's GB/s
    std::vector<BenchFormatResult> formats;
    double q8_speedup = 0; // formats' "q8 moments" speedup over fp32 (issue 28's goal: >= 1.5)
};

struct BenchAdamReport {
    optim::PluginInfo plugin;
    int64_t params = 0;
    int threads = 0;
    bool lowp_copy = true;
    int reps = 0;
    int pairs = 0;
    std::string ceiling_isa;            // "avx512", "avx2" or "scalar"
    double huge_page_fraction = -1;     // share of the buffers on huge pages (-1 = unknown)
    double bytes_per_param = 0;         // 30 with the bf16 copy, 28 without
    std::vector<BenchModeResult> modes; // in_place, separate
};

// Bytes one step moves per parameter: the master param read and written (4 or 2 bytes each), the
// grad read, both moments read and written (fp32 4, bf16 2, q8 1 byte plus a 4-byte scale per
// block, read and written), and the 2-byte copy (`lowp_copy`, fp32 master only: a bf16 master is
// its own copy).
double step_bytes_per_param(int32_t grad_dtype, int32_t state_format, int32_t param_dtype,
                            bool lowp_copy, int32_t block);

// Allocates the buffers (2 MiB aligned, transparent huge pages requested, first touched by the
// measuring threads), loads the plugin and measures per mode: every ceiling strategy `reps`
// times round robin, the 3 fastest (median) 4 more times each (calibration), then `pairs`
// triples (finalist 1, plugin step, finalist 2; finalists swapped every other pair) on the same
// buffers; a pair's ceiling is the faster of its two finalist passes. Throws
// core::Error (Config) for plugin problems, (Runtime) on allocation.
BenchAdamReport bench_adam(const BenchAdamOptions& opt);

std::string bench_adam_text(const BenchAdamReport& r);
std::string bench_adam_json(const BenchAdamReport& r);

} // namespace sof::bench
