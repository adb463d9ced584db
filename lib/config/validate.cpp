// Cross-field and file checks of a loaded deck: each failure names the key(s), where they were
// set (file:line or --set) and what would make the deck valid.
#include "config/validate.h"

#include "config/deck.h"

#include <unistd.h>

#include <climits>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <filesystem>
#include <initializer_list>
#include <vector>

#include "config/batch.h"
#include "config/data_files.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/strfmt.h"

namespace sof::config {

namespace {

namespace fs = std::filesystem;

struct Checker {
    const Origins& origins;
    const std::string& deck_name;
    bool files = true; // check the run's files and directories too (not for `plan`)

    // The location of the first of `keys` that was set explicitly, else the deck's name.
    std::string where(std::initializer_list<const char*> keys) const {
        for (const char* k : keys) {
            auto it = origins.find(k);
            if (it != origins.end()) return it->second.where;
        }
        return deck_name.empty() ? std::string("deck") : deck_name;
    }

    [[noreturn]] void fail(std::initializer_list<const char*> keys, const std::string& msg) const {
        core::throw_error(core::ErrorKind::Config, where(keys) + ": " + msg);
    }
    // A path in the deck the run cannot use (an I/O problem of this machine, exit code 3).
    [[noreturn]] void fail_io(std::initializer_list<const char*> keys,
                              const std::string& msg) const {
        core::throw_error(core::ErrorKind::Io, where(keys) + ": " + msg);
    }
};

// Why a directory cannot hold a run's output ("" when it can): an existing path that is not a
// directory, or whose nearest existing ancestor is not a writable directory (it will be created).
std::string unusable_dir(const std::string& dir) {
    std::error_code ec;
    fs::path p(dir);
    if (fs::exists(p, ec)) {
        if (!fs::is_directory(p, ec))
            return core::strfmt("'%s' exists and is not a directory", dir.c_str());
        if (::access(p.c_str(), W_OK | X_OK) != 0)
            return core::strfmt("directory '%s' is not writable (%s)", dir.c_str(),
                                std::strerror(errno));
        return "";
    }
    fs::path a = p.is_absolute() ? p : fs::current_path(ec) / p;
    for (a = a.parent_path(); !a.empty(); a = a.parent_path()) {
        if (fs::exists(a, ec)) {
            if (!fs::is_directory(a, ec))
                return core::strfmt("'%s' (on the way to '%s') is not a directory", a.c_str(),
                                    dir.c_str());
            if (::access(a.c_str(), W_OK | X_OK) != 0)
                return core::strfmt("cannot create '%s': '%s' is not writable (%s)", dir.c_str(),
                                    a.c_str(), std::strerror(errno));
            return "";
        }
        if (a == a.root_path()) break;
    }
    return "";
}

std::string cwd_note(const std::string& path) {
    if (fs::path(path).is_absolute()) return "";
    std::error_code ec;
    fs::path cwd = fs::current_path(ec);
    return ec ? std::string() : " (looked in " + cwd.string() + ")";
}

// Why the system cannot take `path` as a name ("" when it can): a component longer than NAME_MAX,
// or the whole path with the `reserve` characters the run appends inside it (a checkpoint's
// "/.tmp-step_00000100/exp_avg.rank00001.bin") reaching PATH_MAX. Before this check such a deck
// passed `check` and failed at run time with ENAMETOOLONG (exit 3).
std::string too_long(const std::string& path, size_t reserve) {
    size_t begin = 0;
    while (begin <= path.size()) {
        size_t end = path.find('/', begin);
        if (end == std::string::npos) end = path.size();
        if (end - begin > NAME_MAX)
            return core::strfmt("its component '%s...' has %zu characters, more than the %d a "
                                "file name may have (NAME_MAX)",
                                path.substr(begin, 24).c_str(), end - begin, NAME_MAX);
        begin = end + 1;
    }
    if (path.size() + reserve >= PATH_MAX)
        return core::strfmt("it has %zu characters; with the %zu the run adds to it that passes "
                            "the %d a path may have (PATH_MAX)",
                            path.size(), reserve, PATH_MAX);
    return "";
}

// The path keys of a deck and the characters a run appends to each (files inside a directory,
// ".rank3" suffixes, ".tmp" of atomic writes, ".idx"/".mask" of a data file).
struct PathKey {
    const char* key;
    const std::string* value;
    size_t reserve;
};

void check_path_lengths(const Checker& c, const Config& cfg) {
    const PathKey keys[] = {
        {"runtime.out_dir", &cfg.runtime.out_dir, 64},
        {"train.checkpoint_dir", &cfg.train.checkpoint_dir, 64},
        {"train.metrics", &cfg.train.metrics, 32},
        {"runtime.trace", &cfg.runtime.trace, 32},
        {"train.resume", &cfg.train.resume, 64},
        {"model.init_from", &cfg.model.init_from, 64},
        {"optimizer.plugin_dir", &cfg.optimizer.plugin_dir, 64},
        {"offload.hardware", &cfg.offload.hardware, 0},
        {"data.train", &cfg.data.train, 16},
        {"data.val", &cfg.data.val, 16},
    };
    for (const PathKey& k : keys) {
        const std::string why = too_long(*k.value, k.reserve);
        if (!why.empty())
            c.fail({k.key}, std::string(k.key) + ": the path cannot be used: " + why +
                                "; give a shorter path");
    }
}

void check_model(const Checker& c, const Config& cfg) {
    // The model's sizes, divisibility and bounds are model::validate's (model::validate_deck
    // checks a deck's); here only what involves other sections or files.
    const ModelConfig& m = cfg.model;
    if (m.offload_checkpoints && !m.recompute)
        c.fail({"model.offload_checkpoints", "model.recompute"},
               "model.offload_checkpoints: true keeps the block inputs saved for recompute in "
               "host memory: it needs model.recompute: true");
    if (m.device_checkpoints > 0 && !m.offload_checkpoints)
        c.fail({"model.device_checkpoints", "model.offload_checkpoints"},
               core::strfmt("model.device_checkpoints = %d keeps that many of the offloaded "
                            "checkpoints in device memory: it needs model.offload_checkpoints: "
                            "true",
                            m.device_checkpoints));
    if (m.device_checkpoints > 0 && m.device_checkpoints > m.num_layers - 1 && m.init_from.empty())
        c.fail({"model.device_checkpoints", "model.num_layers"},
               core::strfmt("model.device_checkpoints = %d exceeds the %d block inputs saved "
                            "for recompute (model.num_layers - 1)",
                            m.device_checkpoints, m.num_layers - 1));
    if (!m.init_from.empty()) {
        std::error_code ec;
        const bool hf_dir = fs::is_regular_file(m.init_from + "/config.json", ec);
        if (c.files && !fs::is_regular_file(m.init_from, ec) && !hf_dir)
            c.fail({"model.init_from"},
                   "model.init_from: '" + m.init_from +
                       "' is neither a file nor a Hugging Face "
                       "model directory (with config.json)" +
                       cwd_note(m.init_from) +
                       "; give an llm.c GPT-2 fp32 checkpoint file or an HF directory");
        return; // the checkpoint's header decides the architecture; the trainer checks it
    }
    if (cfg.train.seq_len > m.max_seq_len)
        c.fail({"train.seq_len", "model.max_seq_len"},
               core::strfmt("train.seq_len = %d exceeds model.max_seq_len = %d (the model has "
                            "positions for max_seq_len tokens)",
                            cfg.train.seq_len, m.max_seq_len));
}

// data.pack's document separator, where the deck alone decides it (the trainer resolves -1 from
// prepare.json or config.json: train/batches.h): an id outside the deck's vocabulary, or -1 where
// neither file can exist (built-in training data, no Hugging Face model.init_from).
void check_pack(const Checker& c, const Config& cfg) {
    const DataConfig& d = cfg.data;
    if (!d.pack) return;
    const std::string& init = cfg.model.init_from;
    if (d.eos_id >= 0 && init.empty() && d.eos_id >= cfg.model.vocab_size)
        c.fail({"data.eos_id", "model.vocab_size"},
               core::strfmt("data.eos_id = %d is not a token id of the vocabulary (0..%d, "
                            "model.vocab_size = %d): data.pack ends documents at it",
                            d.eos_id, cfg.model.vocab_size - 1, cfg.model.vocab_size));
    std::error_code ec;
    if (d.eos_id < 0 && d.train == "builtin" &&
        (init.empty() || !fs::is_regular_file(init + "/config.json", ec)))
        c.fail({"data.pack", "data.eos_id"},
               "data.pack = true needs the token that ends a document: data.eos_id = -1 (auto) "
               "reads it from prepare.json beside token shards or from a Hugging Face "
               "model.init_from's config.json, and this deck has neither (data.train = "
               "builtin); set data.eos_id");
}

void check_data(const Checker& c, const Config& cfg) {
    const DataConfig& d = cfg.data;
    const char* keys[2] = {"data.train", "data.val"};
    const std::string* pats[2] = {&d.train, &d.val};
    bool any_builtin = false;
    for (int i = 0; i < 2; i++) {
        const std::string& p = *pats[i];
        if (p == "builtin") {
            any_builtin = true;
            continue;
        }
        if (p.empty())
            c.fail({keys[i]}, std::string(keys[i]) +
                                  " is empty: give 'builtin', a glob of llm.c token shards or a "
                                  "Megatron-LM dataset");
        DataFilesError err; // the loader's rule: llm.c shards, Megatron datasets, what a FIFO is
        if (c.files && find_data_files(p, keys[i], &err).empty()) {
            if (err.kind == core::ErrorKind::Io) c.fail_io({keys[i]}, err.message);
            c.fail({keys[i]}, err.message);
        }
    }
    check_pack(c, cfg);
    if (!any_builtin) return;
    // the built-in corpus is uint16; token shards say their own width (uint16 or uint32) and the
    // loader checks every id against the vocabulary. With model.init_from the checkpoint sets V
    // and the loader checks it.
    if (cfg.model.init_from.empty() && cfg.model.vocab_size > kMaxBuiltinVocab) {
        const char* key = d.train == "builtin" ? "data.train" : "data.val";
        c.fail({"model.vocab_size", key},
               core::strfmt("model.vocab_size = %d does not fit the built-in corpus (%s = "
                            "builtin), whose tokens are uint16: at most %d; give token shards "
                            "for this vocabulary (uint32 shards: scripts/make_shard.py, "
                            "docs/data.md)",
                            cfg.model.vocab_size, key, kMaxBuiltinVocab));
    }
    // one rank's batch (more ranks need more: the loader says so); with train.global_batch the
    // training split's unit is the whole step, global_batch sequences (batch.h)
    const BatchGeometry g = resolve_batch(cfg.train, 1);
    const long long T = cfg.train.seq_len;
    const long long need = static_cast<long long>(g.batch_size) * T + 1;
    const long long step = cfg.train.global_batch > 0 ? cfg.train.global_batch * T + 1 : need;
    if (d.train == "builtin" && d.builtin.train_tokens < step)
        c.fail({"data.builtin.train_tokens", "train.global_batch", "train.batch_size",
                "train.seq_len"},
               cfg.train.global_batch > 0
                   ? core::strfmt("data.builtin.train_tokens = %lld is less than one step "
                                  "(train.global_batch * train.seq_len + 1 = %lld)",
                                  static_cast<long long>(d.builtin.train_tokens), step)
                   : core::strfmt("data.builtin.train_tokens = %lld is less than one batch "
                                  "(train.batch_size * train.seq_len + 1 = %lld)",
                                  static_cast<long long>(d.builtin.train_tokens), step));
    if (d.val == "builtin" && d.builtin.val_tokens < need)
        c.fail({"data.builtin.val_tokens", "train.batch_size", "train.seq_len"},
               core::strfmt("data.builtin.val_tokens = %lld is less than one batch "
                            "(train.batch_size * train.seq_len + 1 = %lld)",
                            static_cast<long long>(d.builtin.val_tokens), need));
}

void check_train(const Checker& c, const Config& cfg) {
    const TrainConfig& t = cfg.train;
    if (t.min_lr > t.lr)
        c.fail({"train.min_lr", "train.lr"},
               core::strfmt("train.min_lr = %g is larger than train.lr = %g", t.min_lr, t.lr));
    if (t.checkpoint_every > 0 && t.checkpoint_dir.empty())
        c.fail({"train.checkpoint_every"},
               core::strfmt("train.checkpoint_every = %d needs train.checkpoint_dir (where to "
                            "write them)",
                            t.checkpoint_every));
    if (t.resume == "auto") {
        if (t.checkpoint_dir.empty())
            c.fail({"train.resume"},
                   "train.resume = auto needs train.checkpoint_dir (where to look for the newest "
                   "checkpoint)");
    } else if (!t.resume.empty()) {
        std::error_code ec;
        if (!fs::is_directory(t.resume, ec))
            c.fail({"train.resume"}, "train.resume: checkpoint directory '" + t.resume +
                                         "' does not exist" + cwd_note(t.resume) +
                                         "; give a step_* directory, 'auto' or \"\"");
        if (!fs::exists(fs::path(t.resume) / "manifest.json", ec))
            c.fail({"train.resume"},
                   "train.resume: '" + t.resume +
                       "' is not a checkpoint (no manifest.json in it); give a step_* directory "
                       "of a checkpoint_dir, 'auto' (the newest in train.checkpoint_dir) or \"\"");
    }
}

// Where the math of a step breaks (values that load but cannot train).
void check_math(const Checker& c, const Config& cfg) {
    const double lr = cfg.train.lr, wd = cfg.optimizer.weight_decay;
    if (cfg.optimizer.type == AdamMode::AdamW && lr * wd >= 1.0)
        c.fail({"optimizer.weight_decay", "train.lr"},
               core::strfmt("train.lr x optimizer.weight_decay = %g x %g = %g: AdamW multiplies "
                            "every decayed weight by 1 - lr x weight_decay each step, which must "
                            "stay above 0 (usual weight_decay: 0 to 0.1)",
                            lr, wd, lr * wd));
    if (cfg.optimizer.type == AdamMode::Adam && wd > 1e15)
        c.fail({"optimizer.weight_decay"},
               core::strfmt("optimizer.weight_decay = %g: Adam's L2 term adds weight_decay x "
                            "weight to every gradient, whose square overflows fp32 (usual: 0 to "
                            "0.1)",
                            wd));
}

// A plugin is named by the name it declares or its file's stem (libcpu_adam.so: cpu_adam): an
// identifier-like word. Whether one of that name is installed is checked with the plugin
// directory at hand (app/deck_checks.h), by `check` and `train` alike.
bool plugin_name_ok(const std::string& name) {
    if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
        return false;
    for (char ch : name)
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.'))
            return false;
    return true;
}

void check_runtime(const Checker& c, const Config& cfg) {
    const std::string& plugin = cfg.optimizer.plugin;
    if (!plugin.empty() && !plugin_name_ok(plugin))
        c.fail({"optimizer.plugin"},
               "optimizer.plugin = '" + plugin +
                   "' is not a plugin name: give 'auto' (the best one for this machine) or a "
                   "plugin's name (cpu_adam, grace_adam, or <name> of a lib<name>.so in "
                   "optimizer.plugin_dir)");
    // train.seq_len over parallel.sp is model::validate's (model::validate_deck), with the heads
    std::error_code ec;
    const std::string& pd = cfg.optimizer.plugin_dir;
    if (!pd.empty() && !fs::is_directory(pd, ec))
        c.fail({"optimizer.plugin_dir"},
               "optimizer.plugin_dir: directory '" + pd + "' does not exist" + cwd_note(pd));
    const std::string& hw = cfg.offload.hardware;
    if (!hw.empty() && !fs::is_regular_file(hw, ec))
        c.fail({"offload.hardware"}, "offload.hardware: file '" + hw + "' does not exist" +
                                         cwd_note(hw) + " (see inputs/hardware/)");
}

// Output paths: out_dir and checkpoint_dir directories, the metrics and trace files' folders.
void check_paths(const Checker& c, const Config& cfg) {
    struct Dir {
        const char* key;
        std::string path;
    };
    std::vector<Dir> dirs;
    if (!cfg.runtime.out_dir.empty()) dirs.push_back({"runtime.out_dir", cfg.runtime.out_dir});
    if (!cfg.train.checkpoint_dir.empty())
        dirs.push_back({"train.checkpoint_dir", cfg.train.checkpoint_dir});
    for (const char* key : {"train.metrics", "runtime.trace"}) {
        const std::string& f =
            std::string(key) == "train.metrics" ? cfg.train.metrics : cfg.runtime.trace;
        if (f.empty()) continue;
        // what the writer refuses (core::open_output): a FIFO would block, a directory or a
        // device cannot take the file; metrics may go to a character device (/dev/null)
        const std::string kind = core::path_kind(f);
        if (kind == "a directory")
            c.fail_io({key}, std::string(key) + ": '" + f + "' is a directory; give a file path");
        const bool metrics = std::string(key) == "train.metrics";
        if (!kind.empty() && kind != "missing" && kind.find("broken") == std::string::npos &&
            !(metrics && kind.find("a character device") != std::string::npos))
            c.fail_io({key}, std::string(key) + ": '" + f + "' is " + kind +
                                 ", not a regular file; give a regular file path");
        fs::path parent = fs::path(f).parent_path();
        dirs.push_back({key, parent.empty() ? std::string(".") : parent.string()});
    }
    for (const Dir& d : dirs) {
        std::string why = unusable_dir(d.path);
        if (!why.empty())
            c.fail_io({d.key}, std::string(d.key) + ": " + why + "; choose a writable directory");
    }
}

} // namespace

void validate(const Config& cfg, const Origins& origins, const std::string& deck_name, bool files) {
    Checker c{origins, deck_name, files};
    if (files) check_path_lengths(c, cfg); // before any path is looked up
    check_model(c, cfg);
    check_data(c, cfg);
    check_train(c, cfg);
    check_math(c, cfg);
    check_runtime(c, cfg);
    if (files) check_paths(c, cfg);
}

std::vector<std::string> deck_warnings(const Config& cfg) {
    std::vector<std::string> out;
    auto where = [&](const char* key) {
        auto it = cfg.origins.find(key);
        return it != cfg.origins.end() ? it->second + ": " : std::string();
    };
    auto warn = [&](bool bad, const char* key, double v, const char* usual) {
        if (bad)
            out.push_back(core::strfmt("%s%s = %g is far outside the usual range (%s): is it a "
                                       "typo?",
                                       where(key).c_str(), key, v, usual));
    };
    warn(cfg.train.lr > 1.0, "train.lr", cfg.train.lr, "1e-6 to 1e-2; training will diverge");
    warn(cfg.optimizer.weight_decay > 1.0, "optimizer.weight_decay", cfg.optimizer.weight_decay,
         "0 to 0.1");
    warn(cfg.optimizer.eps > 1e-2, "optimizer.eps", cfg.optimizer.eps, "1e-8 to 1e-6");
    warn(cfg.model.init_std > 1.0, "model.init_std", cfg.model.init_std, "about 0.02");
    warn(cfg.train.grad_clip > 1e6, "train.grad_clip", cfg.train.grad_clip,
         "0.5 to 10, or 0 for no clipping");
    const TrainConfig& t = cfg.train;
    if (t.warmup_steps > 0 && t.warmup_steps >= t.steps)
        out.push_back(core::strfmt(
            "%strain.warmup_steps = %d >= train.steps = %d: the whole run is warmup (the lr only "
            "reaches train.lr = %g at step %d%s); lower train.warmup_steps (a few percent of "
            "train.steps is usual) or raise train.steps",
            where("train.warmup_steps").c_str(), t.warmup_steps, t.steps, t.lr, t.warmup_steps,
            t.schedule != LrSchedule::Constant ? ", and the decay never starts" : ""));
    if (t.schedule == LrSchedule::Constant && t.min_lr > 0)
        out.push_back(core::strfmt("train.min_lr = %g has no effect with train.schedule = "
                                   "constant; choose linear, cosine or wsd to decay to it",
                                   t.min_lr));
    if (t.schedule == LrSchedule::Wsd && t.decay_fraction > 0 &&
        std::lround(static_cast<double>(t.decay_fraction) * t.steps) < 1)
        out.push_back(core::strfmt("train.decay_fraction = %g of train.steps = %d is less than one "
                                   "step: the wsd schedule never decays; raise it",
                                   t.decay_fraction, t.steps));
    return out;
}

} // namespace sof::config
