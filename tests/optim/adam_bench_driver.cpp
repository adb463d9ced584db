// Stand-alone driver for the Adam benchmark (same arguments as `superoffload bench adam`), so
// the optimizer can be measured without linking the whole program.
#include <cstdio>

#include "bench/bench_adam.h"
#include "bench_adam_args.h"
#include "core/error.h"

int main(int argc, char** argv) {
    try {
        sof::bench::BenchAdamOptions o = sof::app::parse_bench_adam_args(argc - 1, argv + 1);
        sof::bench::BenchAdamReport r = sof::bench::bench_adam(o);
        std::fputs(o.json ? sof::bench::bench_adam_json(r).c_str()
                          : sof::bench::bench_adam_text(r).c_str(),
                   stdout);
        return 0;
    } catch (const sof::core::Error& e) {
        std::fprintf(stderr, "adam_bench_driver: %s: %s\n", sof::core::error_kind_name(e.kind()),
                     e.what());
        return 2;
    }
}
