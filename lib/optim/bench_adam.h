// Adam kernel benchmark: the plugin's step against the memory ceiling (same access pattern,
// trivial arithmetic), in place and with separate outputs. Used by `superoffload bench adam`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace sof::optim {

struct BenchAdamOptions {
    int64_t params = 0; // number of fp32 parameters
    std::string plugin = "auto";
    std::string plugin_dir; // empty = plugin_dir("") resolution
    int threads = 0;        // OpenMP threads for ceiling and plugin; 0 = omp default
    bool lowp_copy = true;  // write the bf16 param copy in the same pass (30 B/param, else 28)
    int reps = 0;           // timed repetitions per measurement (best is kept); 0 = auto
    bool json = false;      // print JSON instead of the table
};

// Parses `adam --params N [--plugin NAME] [--plugin-dir DIR] [--threads T]
// [--bf16-copy on|off] [--reps R] [--json]`; throws core::Error (Usage) naming the bad argument.
BenchAdamOptions parse_bench_adam_args(int argc, char** argv);

struct BenchModeResult {
    std::string mode;           // "in_place" or "separate"
    double ceiling_seconds = 0; // best time of one ceiling pass over all params
    double step_seconds = 0;    // best time of one plugin step over all params
    double ceiling_params_per_s = 0;
    double ceiling_gbps = 0; // GB/s (1e9 bytes) moved by the ceiling
    double params_per_s = 0;
    double gbps = 0;
    double fraction_of_ceiling = 0; // plugin params/s / ceiling params/s
};

struct BenchAdamReport {
    PluginInfo plugin;
    int64_t params = 0;
    int threads = 0;
    bool lowp_copy = true;
    int reps = 0;
    double bytes_per_param = 0;         // 30 with the bf16 copy, 28 without
    std::vector<BenchModeResult> modes; // in_place, separate
};

// Allocates the buffers (64-byte aligned, first touched by the measuring threads), loads the
// plugin and measures. Throws core::Error (Config) for plugin problems, (Runtime) on allocation.
BenchAdamReport bench_adam(const BenchAdamOptions& opt);

std::string bench_adam_text(const BenchAdamReport& r);
std::string bench_adam_json(const BenchAdamReport& r);

} // namespace sof::optim
