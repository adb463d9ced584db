// The command line of `superoffload bench adam` (CLI11 through app/cli.h): also read by the
// stand-alone tests/optim/adam_bench_driver.
#pragma once

#include "bench/bench_adam.h"

namespace sof::app {

// Parses `adam [--params N] [--plugin NAME] [--plugin-dir DIR] [--threads T]
// [--bf16-copy on|off] [--reps R] [--pairs K] [--json]` (argv[0] is "adam"); counts take K, M, G
// suffixes (binary); --params defaults to bench::kBenchAdamDefaultParams (32M, memory-bound).
// Throws core::Error (Usage) naming the bad argument, with the usage line.
bench::BenchAdamOptions parse_bench_adam_args(int argc, char** argv);

} // namespace sof::app
