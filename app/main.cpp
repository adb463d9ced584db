// superoffload: the program. Initialises MPI, dispatches to a subcommand, turns errors into
// one clear message and an exit code (fatal_all for errors every rank sees, fatal_one otherwise).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "commands.h"
#include "fatal.h"

namespace {

const char* kUsage =
    "usage: superoffload <command> [args]\n"
    "commands:\n"
    "  train DECK [--set key=value ...]     train a model from a YAML deck\n"
    "  check DECK [--set key=value ...]     validate a deck and print the effective deck\n"
    "  eval [DECK] [--checkpoint D|--hf D] [--data GLOB]  loss and perplexity on token shards\n"
    "  generate --hf D|--checkpoint D --prompt TEXT|--chat F  continue a prompt (KV cache, "
    "sampling)\n"
    "  plan DECK [--hardware F] [--ranks N] print the offload plan, predicted times, comm per "
    "rank\n"
    "       [--model cpu|gpu]               (gpu: plan as if the model ran on the GPU)\n"
    "  bench adam [--params N] [...]        optimizer kernel benchmark vs the memory ceiling\n"
    "  bench model [--channels C ...]       LLaMA vs GPT-2 block units of equal FLOPs (CPU)\n"
    "  bench import --create DIR | DIR [--rounds N]  HF import vs dd-like read, peak memory\n"
    "  bench attention [--seq T ...]        tiled attention vs the T x T baseline (CPU), peak "
    "memory;\n"
    "       [--gpu 1 --head-dim hd ...]     the CUDA kernels' forward/backward TFLOPS\n"
    "  bench moe [--experts E --topk K ...] the experts' grouped product vs one dense product "
    "(same FLOPs)\n"
    "  bench train DECK [--steps N]         the training step: offload, CPU step exposed, no "
    "offload\n"
    "  export --llmc OUT.bin CHECKPOINT     export a checkpoint as an llm.c GPT-2 fp32 file\n"
    "  export --hf OUT_DIR CHECKPOINT [...] export a LLaMA/Qwen checkpoint as a Hugging Face dir\n"
    "  topo [--xml FILE] [--ranks N]        show the machine topology and rank placement\n"
    "  version                              print the version\n";

int dispatch(int argc, char** argv) {
    using namespace sof;
    if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
        !std::strcmp(argv[1], "help")) {
        std::fputs(kUsage, stdout);
        return argc < 2 ? 2 : 0;
    }
    std::string cmd = argv[1];
    int sub_argc = argc - 2;
    char** sub_argv = argv + 2;
    if (cmd == "train") return app::cmd_train(sub_argc, sub_argv);
    if (cmd == "check") return app::cmd_check(sub_argc, sub_argv);
    if (cmd == "eval") return app::cmd_eval(sub_argc, sub_argv);
    if (cmd == "generate") return app::cmd_generate(sub_argc, sub_argv);
    if (cmd == "plan") return app::cmd_plan(sub_argc, sub_argv);
    if (cmd == "bench") return app::cmd_bench(sub_argc, sub_argv);
    if (cmd == "export") return app::cmd_export(sub_argc, sub_argv);
    if (cmd == "topo") return app::cmd_topo(sub_argc, sub_argv);
    if (cmd == "version" || cmd == "--version") {
        std::printf("superoffload 0.1.0\n");
        return 0;
    }
    SOF_FAIL(Usage, "unknown command '%s' (run 'superoffload help' for the list)", cmd.c_str());
}

} // namespace

int main(int argc, char** argv) {
    int provided = 0;
    // the comm lane issues collectives while the main thread runs the model (and its own small
    // collectives on another communicator): MPI_THREAD_MULTIPLE
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE && size > 1)
        sof::app::fatal_all(rank, sof::core::ErrorKind::Runtime,
                            "this MPI library does not provide MPI_THREAD_MULTIPLE, which "
                            "multi-rank training needs (the comm lane overlaps collectives with "
                            "compute); use an MPI built with thread support (Open MPI, MPICH)");

    int rc = 0;
    try {
        rc = dispatch(argc, argv);
    } catch (const sof::core::Error& e) {
        // Usage and deck errors are found identically by every rank; others may be local.
        bool everyone =
            e.kind() == sof::core::ErrorKind::Usage || e.kind() == sof::core::ErrorKind::Config;
        if (everyone) sof::app::fatal_all(rank, e.kind(), e.what());
        sof::app::fatal_one(rank, size, e.kind(), e.what());
    } catch (const std::bad_alloc&) {
        sof::app::fatal_one(rank, size, sof::core::ErrorKind::Runtime,
                            "out of host memory (std::bad_alloc): reduce the model, batch or "
                            "data size, or give the job more memory");
    } catch (const std::exception& e) {
        sof::app::fatal_one(rank, size, sof::core::ErrorKind::Internal, e.what());
    }
    MPI_Finalize();
    return rc;
}
