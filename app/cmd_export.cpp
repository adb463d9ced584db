// `superoffload export --llmc OUT.bin | --hf OUT_DIR CHECKPOINT`: a checkpoint's parameters as an
// llm.c GPT-2 fp32 file or a Hugging Face directory (LLaMA family; CHECKPOINT: step dir or root).
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/llmc.h"
#include "cli.h"
#include "commands.h"
#include "config/deck.h"
#include "core/error.h"

namespace sof::app {

namespace {

const char* kExportUsage =
    "usage: superoffload export --llmc OUT.bin CHECKPOINT\n"
    "       superoffload export --hf OUT_DIR CHECKPOINT [--dtype bf16|fp32] [--shard-size 5GB]\n"
    "                           [--rounding nearest|stochastic] [--source HF_DIR | --no-source]\n"
    "  --hf writes a Hugging Face model directory (config.json, safetensors shards and their\n"
    "  index) of a LLaMA-family checkpoint, loadable by transformers' from_pretrained and by\n"
    "  model.init_from; written into a temporary directory, then renamed. The tokenizer files\n"
    "  and generation_config.json of the source directory are copied and config.json keeps its\n"
    "  bos/eos/pad token ids; the source is the run's model.init_from (when it is a Hugging\n"
    "  Face directory) unless --source names another or --no-source asks for none.\n"
    "  --rounding  how fp32 weights become bf16: nearest (default, as torch's .to(bfloat16)) or\n"
    "              stochastic (up with the probability of the dropped fraction, keyed by the\n"
    "              run's train.seed, the step and the element: the same bytes every time).\n"
    "              Nearest drops every change below half a bf16 step since the weight was last\n"
    "              a bf16 value, most of a small-lr fine-tune of a bf16 model; stochastic keeps\n"
    "              it in expectation (docs/checkpoints.md, \"bf16 export\")\n"
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

// "5GB", "500MB", "2GiB" or plain bytes.
uint64_t parse_size(const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    std::string unit = end ? std::string(end) : "";
    double mul = 1;
    if (unit == "KB")
        mul = 1e3;
    else if (unit == "MB")
        mul = 1e6;
    else if (unit == "GB")
        mul = 1e9;
    else if (unit == "KiB")
        mul = 1024.0;
    else if (unit == "MiB")
        mul = 1048576.0;
    else if (unit == "GiB")
        mul = 1073741824.0;
    else if (!unit.empty() && unit != "B")
        mul = -1;
    if (!end || end == s.c_str() || mul < 0 || !(v > 0) || v * mul > 1e15)
        core::throw_error(core::ErrorKind::Usage,
                          "export: --shard-size '" + s +
                              "' must be a positive size like 5GB, 500MB, 2GiB or bytes\n" +
                              kExportUsage);
    return static_cast<uint64_t>(v * mul);
}

} // namespace

int cmd_export(int argc, char** argv) {
    std::string out, src, hf_out, dtype = "bf16", shard_size, rounding = "nearest";
    ckpt::HfExportOptions hopt;
    bool no_source = false;
    CliParser p({kExportUsage, "export: unknown option '%s'", [](const std::string& opt) {
                     return "export: " + opt +
                            (opt == "--llmc" ? " needs a file name after it"
                                             : " needs a value after it");
                 }});
    bool help = false;
    p.option("--llmc", &out);
    p.option("--hf", &hf_out);
    p.option("--dtype", &dtype);
    p.option("--shard-size", &shard_size);
    p.option("--rounding", &rounding);
    p.option("--source", &hopt.source_dir);
    p.flag("--no-source", &no_source);
    p.flag("-h,--help", &help);
    const std::vector<std::string> pos = p.parse(argc, argv);
    if (help) {
        std::fputs(kExportUsage, stdout);
        return 0;
    }
    auto usage_fail = [&](const std::string& what) { p.fail(what); };
    if (pos.size() > 1)
        usage_fail("export: more than one checkpoint given ('" + pos[0] + "' and '" + pos[1] +
                   "')");
    if (!pos.empty()) src = pos[0];
    hopt.dtype = dtype;
    if (p.count("--shard-size")) hopt.shard_bytes = parse_size(shard_size);
    if (out.empty() == hf_out.empty())
        usage_fail("export: give exactly one of --llmc OUT.bin and --hf OUT_DIR");
    if (hopt.dtype != "bf16" && hopt.dtype != "fp32")
        usage_fail("export: --dtype '" + hopt.dtype + "' must be bf16 or fp32");
    if (rounding != "nearest" && rounding != "stochastic")
        usage_fail("export: --rounding '" + rounding + "' must be nearest or stochastic");
    const bool hf = !hf_out.empty();
    if (p.count("--rounding") && !(hf && hopt.dtype == "bf16"))
        usage_fail("export: --rounding applies to --hf with --dtype bf16 (fp32 and llm.c files "
                   "keep the weights as they are)");
    if (hf) out = hf_out;
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
    if (hf) {
        if (no_source && !hopt.source_dir.empty())
            usage_fail("export: give at most one of --source and --no-source");
        if (!no_source && hopt.source_dir.empty()) {
            // the run's model.init_from, from the checkpoint's deck
            const config::Config run = config::parse_deck_text(m.deck_yaml, dir + "/deck.yaml");
            const std::string& from = run.model.init_from;
            if (!from.empty() && ckpt::is_hf_dir(from))
                hopt.source_dir = from;
            else if (!from.empty() && !fs::exists(from, ec))
                std::fprintf(stderr,
                             "export: warning: the run's model.init_from '%s' is gone: no "
                             "tokenizer files copied and no token ids kept (give --source DIR)\n",
                             from.c_str());
        }
        if (rounding == "stochastic") {
            const config::Config run = config::parse_deck_text(m.deck_yaml, dir + "/deck.yaml");
            ckpt::round_bf16_stochastic(params.data(), params.size(), run.train.seed, m.step);
        }
        ckpt::export_hf(out, layout, params.data(), hopt);
        std::printf("exported %s (step %lld, %zu params, %s L=%d C=%d V=%d) to %s (%s%s%s%s)\n",
                    dir.c_str(), static_cast<long long>(m.step), layout.num_params,
                    model::arch_name(m.model.arch), m.model.num_layers, m.model.channels,
                    m.model.vocab_size, out.c_str(), hopt.dtype.c_str(),
                    rounding == "stochastic" ? ", stochastic rounding" : "",
                    hopt.source_dir.empty() ? "" : ", tokenizer files from ",
                    hopt.source_dir.c_str());
        std::fflush(stdout);
        return 0;
    }
    if (m.model.llama_family())
        SOF_FAIL(Usage,
                 "export --llmc: %s holds a %s model; the llm.c format holds GPT-2 only: use "
                 "--hf OUT_DIR",
                 dir.c_str(), model::arch_name(m.model.arch));
    ckpt::export_llmc(out, m.model, layout, params.data());
    std::printf("exported %s (step %lld, %zu params, L=%d NH=%d C=%d V=%d) to %s\n", dir.c_str(),
                static_cast<long long>(m.step), layout.num_params, m.model.num_layers,
                m.model.num_heads, m.model.channels, m.model.vocab_size, out.c_str());
    std::fflush(stdout);
    return 0;
}

} // namespace sof::app
