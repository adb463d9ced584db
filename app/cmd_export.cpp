// `superoffload export --llmc OUT.bin CHECKPOINT`: write a checkpoint's parameters as an llm.c
// GPT-2 fp32 file. CHECKPOINT is a step directory or a checkpoint root (its newest step is used).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/llmc.h"
#include "commands.h"
#include "core/error.h"

namespace sof::app {

namespace {

const char* kExportUsage =
    "usage: superoffload export --llmc OUT.bin CHECKPOINT\n"
    "  Writes the parameters of a superoffload checkpoint as an llm.c GPT-2 fp32 model file\n"
    "  (header magic 20240326, version 3), loadable by llm.c and by model.init_from.\n"
    "  CHECKPOINT  a step directory (e.g. ckpt/step_00000100) or a checkpoint root\n"
    "              (train.checkpoint_dir), in which case its newest complete step is used\n"
    "  --llmc OUT  the file to write (written to OUT.tmp, then renamed)\n";

// True when `p` is `dir` or lies under it (both made absolute, symlinks resolved where they exist).
bool inside(const std::filesystem::path& p, const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path a = fs::weakly_canonical(p, ec), d = fs::weakly_canonical(dir, ec);
    auto ai = a.begin(), di = d.begin();
    for (; di != d.end(); ++di, ++ai) {
        if (di->empty()) continue; // a trailing separator
        if (ai == a.end() || *ai != *di) return false;
    }
    return true;
}

// The export must never overwrite what it reads: not a file of the step directory, nor a place
// inside the checkpoint root a later resume reads from.
void refuse_output_inside(const std::string& out, const std::string& step_dir,
                          const std::string& src) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (inside(out, step_dir) || (fs::is_directory(src, ec) && inside(out, src)))
        core::throw_error(core::ErrorKind::Usage,
                          core::strfmt("export: the output '%s' lies inside the checkpoint '%s' "
                                       "that is being read; writing it there would destroy or "
                                       "mix with the checkpoint: choose a path outside it",
                                       out.c_str(), src.c_str()));
}

} // namespace

int cmd_export(int argc, char** argv) {
    std::string out, src;
    auto usage_fail = [](const std::string& what) {
        core::throw_error(core::ErrorKind::Usage, what + "\n" + kExportUsage);
    };
    for (int i = 0; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kExportUsage, stdout);
            return 0;
        }
        if (a == "--llmc") {
            if (i + 1 >= argc) usage_fail("export: --llmc needs a file name after it");
            out = argv[++i];
        } else if (a.rfind("--llmc=", 0) == 0) {
            out = a.substr(7);
        } else if (a.rfind("-", 0) == 0) {
            usage_fail("export: unknown option '" + a + "'");
        } else if (src.empty()) {
            src = a;
        } else {
            usage_fail("export: more than one checkpoint given ('" + src + "' and '" + a + "')");
        }
    }
    if (out.empty()) usage_fail("export: missing --llmc OUT.bin (the only export format)");
    if (src.empty()) usage_fail("export: missing the checkpoint directory to export");

    namespace fs = std::filesystem;
    std::string dir = src;
    std::error_code ec;
    if (fs::is_directory(src, ec) && !fs::exists(fs::path(src) / "manifest.json", ec)) {
        std::string latest = ckpt::find_latest(src);
        if (latest.empty())
            SOF_FAIL(Io,
                     "%s holds no complete checkpoint (no step_N directory with a manifest.json); "
                     "pass a checkpoint root written by 'superoffload train' or one of its "
                     "step directories",
                     src.c_str());
        dir = latest;
    }

    refuse_output_inside(out, dir, src);

    int rank = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) return 0; // one writer; other ranks of an mpirun have nothing to do

    ckpt::Manifest m;
    std::vector<float> params;
    ckpt::load_params(dir, &m, &params);
    model::ParamLayout layout = model::make_layout(m.model);
    if (params.size() != layout.num_params)
        SOF_FAIL(Format, "checkpoint %s holds %zu params but its model needs %zu", dir.c_str(),
                 params.size(), layout.num_params);
    ckpt::export_llmc(out, m.model, layout, params.data());
    std::printf("exported %s (step %lld, %zu params, L=%d NH=%d C=%d V=%d) to %s\n", dir.c_str(),
                static_cast<long long>(m.step), layout.num_params, m.model.num_layers,
                m.model.num_heads, m.model.channels, m.model.vocab_size, out.c_str());
    std::fflush(stdout);
    return 0;
}

} // namespace sof::app
