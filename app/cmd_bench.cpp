// `superoffload bench adam ...`: the optimizer plugin against the memory ceiling, paired;
// `superoffload bench model ...`: LLaMA vs GPT-2 block units of equal FLOPs on the CPU, paired;
// `superoffload bench attention ...`: the tiled attention op against the T x T baseline (CPU);
// `superoffload bench train DECK ...`: the training step with and without offload
// (cmd_bench_train).
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "core/error.h"
#include "model/bench_model.h"
#include "bench/bench_adam.h"

namespace sof::app {

int cmd_bench(int argc, char** argv) {
    if (argc >= 1 && std::strcmp(argv[0], "import") == 0) return cmd_bench_import(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "attention") == 0) return cmd_bench_attention(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "train") == 0) return cmd_bench_train(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "model") == 0) {
        std::fputs(model::bench_model(model::parse_bench_model_args(argc, argv)).c_str(), stdout);
        return 0;
    }
    bench::BenchAdamOptions o = bench::parse_bench_adam_args(argc, argv);
    bench::BenchAdamReport r = bench::bench_adam(o);
    std::fputs(o.json ? bench::bench_adam_json(r).c_str() : bench::bench_adam_text(r).c_str(),
               stdout);
    return 0;
}

} // namespace sof::app
