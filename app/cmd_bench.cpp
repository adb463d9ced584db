// `superoffload bench adam ...`: the optimizer plugin against the memory ceiling, paired;
// `superoffload bench model ...`: LLaMA vs GPT-2 block units of equal FLOPs on the CPU, paired;
// `superoffload bench attention ...`: the tiled attention op against the T x T baseline (CPU),
// or (--gpu 1) the CUDA attention kernels;
// `superoffload bench moe ...`: the experts' grouped product beside one dense product of the same
// FLOPs (cmd_bench_moe);
// `superoffload bench train DECK ...`: the training step with and without offload
// (cmd_bench_train).
#include <cstdio>
#include <cstring>

#include "bench/bench_adam.h"
#include "bench_adam_args.h"
#include "bench_model.h"
#include "commands.h"
#include "core/error.h"
#include "core/strfmt.h"

namespace sof::app {

int cmd_bench(int argc, char** argv) {
    if (argc >= 1 && std::strcmp(argv[0], "import") == 0) return cmd_bench_import(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "attention") == 0) return cmd_bench_attention(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "train") == 0) return cmd_bench_train(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "moe") == 0) return cmd_bench_moe(argc, argv);
    if (argc >= 1 && std::strcmp(argv[0], "model") == 0) {
        std::fputs(bench_model(parse_bench_model_args(argc, argv)).c_str(), stdout);
        return 0;
    }
    if (argc < 1 || std::strcmp(argv[0], "adam") != 0)
        SOF_FAIL(Usage,
                 "bench: %s; the benchmarks are adam, model, attention, moe, import and train (see "
                 "superoffload --help)",
                 argc < 1 ? "name a benchmark"
                          : core::strfmt("unknown benchmark '%s'", argv[0]).c_str());
    bench::BenchAdamOptions o = parse_bench_adam_args(argc, argv);
    bench::BenchAdamReport r = bench::bench_adam(o);
    std::fputs(o.json ? bench::bench_adam_json(r).c_str() : bench::bench_adam_text(r).c_str(),
               stdout);
    bool above = false;
    for (const bench::BenchModeResult& m : r.modes)
        above = above || m.fraction_of_ceiling > 1.0 || m.fraction_max > 1.0;
    if (above && !o.json)
        std::fputs(
            "note: a fraction above 100% means the plugin's step ran faster than the measured "
            "ceiling. The ceiling is the fastest of the plain access strategies this benchmark "
            "times on the same buffers (a yardstick, not the hardware's peak bandwidth): a "
            "plugin may beat it with a better access pattern (tiling, non-temporal stores). "
            "Within a pair, above 100% by a few percent is timing noise (see min..max).\n",
            stdout);
    return 0;
}

} // namespace sof::app
