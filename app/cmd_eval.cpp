// `superoffload eval`: validation loss and perplexity of a checkpoint or a Hugging Face directory
// on token shards, at any rank count (the trainer's model, ZeRO-3 and Ulysses; forward only).
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "comm/world.h"
#include "cli.h"
#include "commands.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/log.h"
#include "model/model_config.h"
#include "tools.h"
#include "train/trainer.h"

namespace sof::app {

namespace {

const char* kEvalUsage =
    "usage: superoffload eval [DECK] [--checkpoint DIR | --hf DIR] [--data GLOB | --text FILE]\n"
    "                         [--tokenizer HF_DIR] [--batches N] [--set key=value ...]\n"
    "  Loss (mean cross-entropy, nats/token) and perplexity of a model on token shards, at any\n"
    "  rank count (mpirun -n N ...); loss masks (<shard>.mask) are honoured.\n"
    "  --checkpoint DIR  a step directory or a checkpoint root (its newest step); without DECK\n"
    "                    the checkpoint's own deck (deck.yaml) is the base\n"
    "  --hf DIR          a Hugging Face model directory (config.json + safetensors)\n"
    "  DECK              a deck for the rest (batch_size, seq_len, device, parallel.sp, ...);\n"
    "                    its model.init_from is the model when neither option is given\n"
    "  --data GLOB       token shards to evaluate on (sets data.val); default: the deck's "
    "data.val\n"
    "  --text FILE       text, JSONL or chat JSONL, tokenized now by scripts/prepare_data.py with\n"
    "                    the tokenizer of --tokenizer (default: --hf, or the run's "
    "model.init_from)\n"
    "                    into ./eval-tokens-<pid> (removed afterwards; repeat --text for more)\n"
    "  --batches N       global validation batches to read (default 0: all of them, once); more\n"
    "                    than the data holds is clamped to it with a warning\n"
    "  Prints 'eval: loss L ppl P | ...' (rank 0).\n";

struct EvalArgs {
    std::string deck, checkpoint, hf, data, tokenizer;
    std::vector<std::string> texts;
    int batches = 0;
    bool help = false;
    std::vector<std::string> overrides;
};

[[noreturn]] void usage_fail(const std::string& what) {
    core::throw_error(core::ErrorKind::Usage, "eval: " + what + "\n" + kEvalUsage);
}

EvalArgs parse(int argc, char** argv) {
    EvalArgs a;
    CliParser p({kEvalUsage, "eval: unknown option '%s'", [](const std::string& opt) {
                     return "eval: " + opt + " needs a value after it";
                 }});
    std::string batches;
    p.option("--checkpoint", &a.checkpoint);
    p.option("--hf", &a.hf);
    p.option("--data", &a.data);
    p.option("--tokenizer", &a.tokenizer);
    p.option("--batches", &batches);
    p.option_list("--text", &a.texts);
    p.option_list("--set", &a.overrides);
    p.flag("-h,--help", &a.help);
    const std::vector<std::string> pos = p.parse(argc, argv);
    if (a.help) return a;
    if (pos.size() > 1)
        usage_fail("more than one deck given ('" + pos[0] + "' and '" + pos[1] + "')");
    if (!pos.empty()) a.deck = pos[0];
    if (p.count("--batches")) {
        char* end = nullptr;
        const long n = std::strtol(batches.c_str(), &end, 10);
        if (batches.empty() || *end != '\0' || n < 0 || n > (1 << 30))
            usage_fail("--batches '" + batches + "' must be an integer >= 0 (0: all batches)");
        a.batches = static_cast<int>(n);
    }
    if (!a.checkpoint.empty() && !a.hf.empty())
        usage_fail("give at most one of --checkpoint and --hf");
    if (a.deck.empty() && a.checkpoint.empty() && a.hf.empty())
        usage_fail("give a deck, --checkpoint DIR or --hf DIR");
    if (!a.texts.empty() && !a.data.empty()) usage_fail("give at most one of --data and --text");
    return a;
}

// The deck keys that describe `m` (the architecture a checkpoint holds), init_from cleared.
void set_model_keys(config::ModelConfig& c, const model::ArchConfig& m) {
    model::set_deck_model(m, &c);
    c.init_from.clear();
}

// Rank 0 tokenizes the text files into `out` (all of them as validation data); every rank
// learns whether it worked. collective: all ranks of MPI_COMM_WORLD
void tokenize_texts(const EvalArgs& a, const std::string& tokenizer, const std::string& out) {
    int rank = 0, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::string cmd;
    if (rank == 0) {
        cmd = sh_quote(script_path("prepare_data.py")) + " --tokenizer " + sh_quote(tokenizer) +
              " --out " + sh_quote(out) + " --val-fraction 1 --quiet";
        for (const std::string& t : a.texts) {
            cmd += ' ';
            cmd += sh_quote(t);
        }
        std::fflush(stdout);
        rc = std::system(cmd.c_str());
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != 0)
        SOF_FAIL(Config,
                 "eval --text: tokenizing with scripts/prepare_data.py failed (exit status %d; its "
                 "message is above): %s",
                 rc, rank == 0 ? cmd.c_str() : "see rank 0");
}

// The folder of --text's token shards, removed when eval ends, whether it ends well or by an
// error (an exception leaving cmd_eval: main turns it into the message and the exit code). After
// a normal end rank 0 removes it (every rank has passed the barrier that ends the reading); while
// an error unwinds every rank tries (rank 0 may be the one that never unwinds: another rank's
// error aborts the job), ignoring what another rank removed first.
class TokenDir {
  public:
    TokenDir() = default;
    TokenDir(const TokenDir&) = delete;
    TokenDir& operator=(const TokenDir&) = delete;
    ~TokenDir() {
        if (path_.empty()) return;
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank != 0 && std::uncaught_exceptions() == 0) return;
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    void set(const std::string& path) { path_ = path; }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

} // namespace

int cmd_eval(int argc, char** argv) {
    namespace fs = std::filesystem;
    const EvalArgs a = parse(argc, argv);
    if (a.help) {
        std::fputs(kEvalUsage, stdout);
        return 0;
    }

    // the base deck: the given one, or the checkpoint's, or the defaults
    std::string step_dir;
    config::Config base;
    std::string name = a.deck;
    if (!a.deck.empty()) base = config::load_deck(a.deck, {}, config::DeckChecks::NoFiles);
    if (!a.checkpoint.empty()) {
        step_dir = a.checkpoint;
        std::error_code ec;
        if (fs::is_directory(step_dir, ec) && !fs::exists(fs::path(step_dir) / "manifest.json")) {
            step_dir = ckpt::find_latest(a.checkpoint);
            if (step_dir.empty())
                SOF_FAIL(Io,
                         "eval: %s holds no complete checkpoint (no step_N directory with a "
                         "manifest.json); pass a checkpoint root written by 'superoffload train' "
                         "or one of its step directories",
                         a.checkpoint.c_str());
        }
        const ckpt::Manifest m = ckpt::load_manifest(step_dir);
        if (a.deck.empty()) {
            base = config::parse_deck_text(m.deck_yaml, step_dir + "/deck.yaml");
            name = step_dir + "/deck.yaml";
        }
        set_model_keys(base.model, m.model);
    }
    if (!a.hf.empty()) base.model.init_from = a.hf;
    // evaluation writes nothing and takes no run directory
    base.train.resume.clear();
    base.train.checkpoint_dir.clear();
    base.train.checkpoint_every = 0;
    base.train.metrics.clear();
    base.runtime.out_dir.clear();
    base.runtime.trace.clear();
    base.train.global_batch = 0; // batch_size is what eval reads per rank; no accumulation
    base.train.grad_accum = 1;
    if (!a.data.empty()) base.data.val = a.data;
    TokenDir token_dir;
    if (!a.texts.empty()) {
        std::string tokenizer = a.tokenizer;
        if (tokenizer.empty()) tokenizer = !a.hf.empty() ? a.hf : base.model.init_from;
        if (tokenizer.empty() && !step_dir.empty())
            tokenizer = config::parse_deck_text(ckpt::load_manifest(step_dir).deck_yaml, step_dir)
                            .model.init_from;
        if (tokenizer.empty() || !ckpt::is_hf_dir(tokenizer))
            usage_fail("--text needs a tokenizer: give --tokenizer HF_DIR (the model's Hugging "
                       "Face directory)");
        long pid = static_cast<long>(::getpid());
        MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        token_dir.set((fs::current_path() / ("eval-tokens-" + std::to_string(pid))).string());
        tokenize_texts(a, tokenizer, token_dir.path());
        base.data.val = token_dir.path() + "/val_*.bin";
    }
    base.data.train = base.data.val; // the trainer builds a training loader too: same files
    std::vector<std::string> overrides = a.overrides;
    // --set data.val=... also moves the training loader along
    for (const std::string& o : a.overrides)
        if (o.rfind("data.val=", 0) == 0) overrides.push_back("data.train=" + o.substr(9));
    config::Config cfg = config::load_deck_from_string(config::effective_yaml(base),
                                                       name.empty() ? "eval" : name, overrides);

    comm::World world(MPI_COMM_WORLD);
    core::Log log(world.rank(), cfg.runtime.log_level);
    const std::string what = !step_dir.empty()              ? "checkpoint " + step_dir
                             : !cfg.model.init_from.empty() ? "model " + cfg.model.init_from
                                                            : "a freshly initialised model";
    log.info("superoffload eval: %s on '%s' (%d rank%s)", what.c_str(), cfg.data.val.c_str(),
             world.size(), world.size() == 1 ? "" : "s");
    train::Trainer trainer(cfg, world, log);
    if (!step_dir.empty()) trainer.load_weights(step_dir);
    const train::EvalResult r = trainer.evaluate(a.batches);
    if (world.rank() == 0) {
        std::printf("eval: loss %.6f ppl %.4f | %.0f target tokens in %lld batch(es) of %d x %d "
                    "per rank, %d rank(s) | %.0f tok/s | %.2f s\n",
                    r.loss, r.perplexity, r.tokens, static_cast<long long>(r.batches),
                    cfg.train.batch_size, cfg.train.seq_len, world.size(), r.tokens_per_s,
                    r.seconds);
        std::fflush(stdout);
    }
    if (!token_dir.path().empty())
        MPI_Barrier(MPI_COMM_WORLD); // every rank is done with the files: rank 0 removes them
    return 0;
}

} // namespace sof::app
