// Stand-alone driver for the Adam benchmark (same arguments as `superoffload bench adam`), so
// the optimizer can be measured without linking the whole program.
#include <cstdio>

#include "core/error.h"
#include "optim/bench_adam.h"

int main(int argc, char** argv) {
    try {
        sof::optim::BenchAdamOptions o = sof::optim::parse_bench_adam_args(argc - 1, argv + 1);
        sof::optim::BenchAdamReport r = sof::optim::bench_adam(o);
        std::fputs(o.json ? sof::optim::bench_adam_json(r).c_str()
                          : sof::optim::bench_adam_text(r).c_str(),
                   stdout);
        return 0;
    } catch (const sof::core::Error& e) {
        std::fprintf(stderr, "adam_bench_driver: %s: %s\n", sof::core::error_kind_name(e.kind()),
                     e.what());
        return 2;
    }
}
