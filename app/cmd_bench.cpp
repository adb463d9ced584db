// `superoffload bench adam --params N [--plugin NAME] [--threads T] [--bf16-copy on|off] [...]`:
// the plugin's step against the memory ceiling (best of several access strategies), paired.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "optim/bench_adam.h"

namespace sof::app {

int cmd_bench(int argc, char** argv) {
    optim::BenchAdamOptions o = optim::parse_bench_adam_args(argc, argv);
    optim::BenchAdamReport r = optim::bench_adam(o);
    std::fputs(o.json ? optim::bench_adam_json(r).c_str() : optim::bench_adam_text(r).c_str(),
               stdout);
    return 0;
}

} // namespace sof::app
