// Optimizer plugin loader: finds lib*.so in the plugin directory, checks the ABI version,
// selects by name or score, and wraps the plugin's C entry points with error checking.
#include "optim/optimizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::optim {

namespace fs = std::filesystem;

namespace {

const char* target_name(sof_target t) {
    return t == SOF_TARGET_CUDA ? "cuda" : "host";
}

const char* status_name(sof_status st) {
    switch (st) {
    case SOF_OK:
        return "ok";
    case SOF_ERR_INVALID_ARGUMENT:
        return "invalid argument";
    case SOF_ERR_UNSUPPORTED:
        return "unsupported";
    case SOF_ERR_DEVICE:
        return "device error";
    case SOF_ERR_OUT_OF_MEMORY:
        return "out of memory";
    case SOF_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

// "libcpu_adam.so" -> "cpu_adam"
std::string stem_of(const fs::path& p) {
    std::string s = p.filename().string();
    if (s.rfind("lib", 0) == 0) s = s.substr(3);
    if (s.size() > 3 && s.compare(s.size() - 3, 3, ".so") == 0) s.resize(s.size() - 3);
    return s;
}

// A dlopen'ed plugin file; closes the handle unless released.
struct OpenedPlugin {
    void* handle = nullptr;
    const sof_optim_plugin* table = nullptr;
    std::string error; // why table is null or unusable
    OpenedPlugin() = default;
    OpenedPlugin(const OpenedPlugin&) = delete;
    OpenedPlugin& operator=(const OpenedPlugin&) = delete;
    ~OpenedPlugin() {
        if (handle) dlclose(handle);
    }
};

// Opens `path` and fetches its table; `error` says why when table is null. An ABI mismatch
// still returns the table (only abi_version may be read from it).
void open_plugin(const std::string& path, OpenedPlugin& out) {
    dlerror();
    out.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!out.handle) {
        const char* e = dlerror();
        out.error = core::strfmt("dlopen failed: %s", e ? e : "unknown error");
        return;
    }
    void* sym = dlsym(out.handle, SOF_OPTIM_ENTRY);
    if (!sym) {
        out.error = core::strfmt("no symbol %s", SOF_OPTIM_ENTRY);
        return;
    }
    auto entry = reinterpret_cast<sof_optim_entry_fn>(sym);
    out.table = entry();
    if (!out.table) out.error = core::strfmt("%s returned NULL", SOF_OPTIM_ENTRY);
}

bool abi_ok(const sof_optim_plugin* t) {
    return t->abi_version == SOF_OPTIM_ABI_VERSION && t->struct_size >= sizeof(sof_optim_plugin);
}

// Why a table cannot be used, as a predicate that follows "the plugin ...".
std::string abi_note(const sof_optim_plugin* t) {
    if (t->abi_version != SOF_OPTIM_ABI_VERSION)
        return core::strfmt("was built for optimizer ABI version %u, but this superoffload "
                            "expects version %d",
                            t->abi_version, SOF_OPTIM_ABI_VERSION);
    return core::strfmt("has a plugin table of %u bytes, but optimizer ABI version %d needs at "
                        "least %zu bytes",
                        t->struct_size, SOF_OPTIM_ABI_VERSION, sizeof(sof_optim_plugin));
}

PluginInfo describe(const std::string& path, const OpenedPlugin& op) {
    PluginInfo pi;
    pi.path = path;
    pi.name = stem_of(path);
    if (!op.table) {
        pi.description = op.error;
        pi.unusable = op.error;
        pi.loadable = false;
        return pi;
    }
    if (!abi_ok(op.table)) {
        pi.description = abi_note(op.table);
        pi.unusable = pi.description;
        pi.abi_ok = false;
        return pi;
    }
    const sof_optim_plugin* t = op.table;
    if (t->name) pi.name = t->name;
    if (t->description) pi.description = t->description;
    pi.target = t->target == SOF_TARGET_CUDA ? SOF_TARGET_CUDA : SOF_TARGET_HOST;
    pi.score = t->score ? std::max(0, static_cast<int>(t->score())) : 0;
    const char* v = t->variant ? t->variant() : nullptr;
    pi.variant = v ? v : "";
    if (pi.score <= 0)
        pi.unusable = "scores 0 on this machine" +
                      (pi.description.empty() ? std::string() : " (" + pi.description + ")");
    return pi;
}

// "cpu_adam (host avx512, score 30), libfoo.so (not loadable: dlopen failed: ...)"
std::string found_list(const std::vector<PluginInfo>& all) {
    if (all.empty()) return "none";
    std::string s;
    for (const auto& p : all) {
        if (!s.empty()) s += ", ";
        if (!p.unusable.empty() && p.score <= 0 && p.variant.empty())
            s += core::strfmt("%s (not loadable: %s)", fs::path(p.path).filename().c_str(),
                              p.unusable.c_str());
        else if (!p.unusable.empty())
            s += core::strfmt("%s (%s%s%s, %s)", p.name.c_str(), target_name(p.target),
                              p.variant.empty() ? "" : " ", p.variant.c_str(), p.unusable.c_str());
        else
            s += core::strfmt("%s (%s%s%s, score %d)", p.name.c_str(), target_name(p.target),
                              p.variant.empty() ? "" : " ", p.variant.c_str(), p.score);
    }
    return s;
}

} // namespace

std::string plugin_dir(const std::string& dir) {
    if (!dir.empty()) return dir;
    const char* env = std::getenv("SOF_PLUGIN_DIR");
    if (env && *env) return env;
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return "plugins";
    return (exe.parent_path().parent_path() / "plugins").lexically_normal().string();
}

std::vector<PluginInfo> list_plugins(const std::string& dir) {
    std::vector<PluginInfo> out;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string f = e.path().filename().string();
        if (f.rfind("lib", 0) == 0 && f.size() > 6 && f.compare(f.size() - 3, 3, ".so") == 0)
            files.push_back(fs::absolute(e.path()).lexically_normal().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
        OpenedPlugin op;
        open_plugin(f, op);
        if (!op.table && op.handle)
            op.error = core::strfmt("not a superoffload optimizer plugin (%s)", op.error.c_str());
        out.push_back(describe(f, op));
    }
    return out;
}

sof_adam_hparams make_hparams(float lr, float beta1, float beta2, float eps, float weight_decay,
                              int64_t step, sof_adam_mode mode, bool bias_correction,
                              float grad_scale) {
    sof_adam_hparams h{};
    h.struct_size = sizeof(sof_adam_hparams);
    h.lr = lr;
    h.beta1 = beta1;
    h.beta2 = beta2;
    h.eps = eps;
    h.weight_decay = weight_decay;
    h.step = step;
    h.mode = mode;
    h.bias_correction = bias_correction ? 1 : 0;
    h.grad_scale = grad_scale;
    return h;
}

sof_adam_slice make_slice(int64_t n, float* param, const void* grad, sof_dtype grad_dtype,
                          void* exp_avg, void* exp_avg_sq, sof_dtype state_dtype) {
    sof_adam_slice s{};
    s.struct_size = sizeof(sof_adam_slice);
    s.n = n;
    s.param = param;
    s.grad = grad;
    s.grad_dtype = grad_dtype;
    s.lowp_dtype = SOF_DTYPE_BF16;
    s.exp_avg = exp_avg;
    s.exp_avg_sq = exp_avg_sq;
    s.param_out = param;
    s.exp_avg_out = exp_avg;
    s.exp_avg_sq_out = exp_avg_sq;
    s.lowp_out = nullptr;
    s.state_dtype = state_dtype;
    return s;
}

PluginInfo find_plugin(const std::string& dir, const std::string& name, sof_target target) {
    std::string d = plugin_dir(dir);
    std::error_code ec;
    if (!fs::is_directory(d, ec))
        SOF_FAIL(Config,
                 "optimizer plugin directory '%s' does not exist: set optimizer.plugin_dir or "
                 "SOF_PLUGIN_DIR to the folder holding lib<plugin>.so (build/plugins)",
                 d.c_str());
    std::vector<PluginInfo> all = list_plugins(d);
    std::string want = name.empty() ? "auto" : name;
    const PluginInfo* pick = nullptr;
    if (want == "auto") {
        for (const auto& p : all) {
            if (p.target != target || p.score <= 0) continue;
            if (!pick || p.score > pick->score) pick = &p;
        }
        if (!pick)
            SOF_FAIL(Config,
                     "optimizer.plugin 'auto': no %s-target plugin in %s can run on this machine; "
                     "found: %s",
                     target_name(target), d.c_str(), found_list(all).c_str());
    } else {
        for (const auto& p : all)
            if (p.name == want || stem_of(p.path) == want) {
                pick = &p;
                break;
            }
        if (!pick)
            SOF_FAIL(Config, "optimizer.plugin '%s' not found in %s; found: %s", want.c_str(),
                     d.c_str(), found_list(all).c_str());
    }
    if (!pick->loadable)
        SOF_FAIL(Config, "optimizer plugin '%s' (%s) cannot be loaded: %s", want.c_str(),
                 pick->path.c_str(), pick->unusable.c_str());
    if (!pick->abi_ok)
        SOF_FAIL(Config,
                 "optimizer plugin '%s' (%s) %s: rebuild the plugin against this "
                 "superoffload's sof_optim_abi.h",
                 want.c_str(), pick->path.c_str(), pick->description.c_str());
    if (pick->target != target)
        SOF_FAIL(Config,
                 "optimizer plugin '%s' computes on the %s target but the %s target is needed "
                 "here; found: %s",
                 want.c_str(), target_name(pick->target), target_name(target),
                 found_list(all).c_str());
    if (pick->score <= 0)
        SOF_FAIL(Config,
                 "optimizer plugin '%s' (%s) cannot run on this machine (score 0%s%s); choose "
                 "another optimizer.plugin or 'auto'; found: %s",
                 want.c_str(), pick->path.c_str(), pick->description.empty() ? "" : ": ",
                 pick->description.c_str(), found_list(all).c_str());
    return *pick;
}

std::unique_ptr<Optimizer> Optimizer::load(const std::string& dir, const std::string& name,
                                           sof_target target, int num_threads, int device) {
    const PluginInfo found = find_plugin(dir, name, target);
    const PluginInfo* pick = &found;
    const std::string want = name.empty() ? "auto" : name;
    auto opt = std::unique_ptr<Optimizer>(new Optimizer());
    OpenedPlugin op;
    open_plugin(pick->path, op);
    if (!op.table)
        SOF_FAIL(Config, "optimizer plugin '%s' (%s) cannot be loaded: %s", want.c_str(),
                 pick->path.c_str(), op.error.c_str());
    if (!abi_ok(op.table)) // replaced since it was listed
        SOF_FAIL(Config,
                 "optimizer plugin '%s' (%s) %s: rebuild the plugin against this "
                 "superoffload's sof_optim_abi.h",
                 want.c_str(), pick->path.c_str(), abi_note(op.table).c_str());

    opt->info_ = *pick;
    opt->plugin_ = op.table;
    sof_optim_init init{};
    init.struct_size = sizeof(sof_optim_init);
    init.num_threads = num_threads;
    init.device = device;
    sof_optim_ctx* ctx = nullptr;
    sof_status st = op.table->create(&init, &ctx);
    if (st != SOF_OK || !ctx)
        SOF_FAIL(Runtime, "optimizer plugin '%s' (%s): create failed (%s)", want.c_str(),
                 pick->path.c_str(), status_name(st));
    opt->ctx_ = ctx;
    opt->handle_ = op.handle;
    op.handle = nullptr; // owned by the Optimizer now
    return opt;
}

Optimizer::~Optimizer() {
    if (plugin_ && ctx_) plugin_->destroy(ctx_);
    if (handle_) dlclose(handle_);
}

void Optimizer::check(sof_status st, const char* what) {
    if (st == SOF_OK) return;
    const char* msg = plugin_->last_error ? plugin_->last_error(ctx_) : nullptr;
    SOF_FAIL(Runtime, "optimizer plugin '%s' (%s): %s failed (%s): %s", info_.name.c_str(),
             info_.variant.c_str(), what, status_name(st), msg && *msg ? msg : "no detail");
}

sof_adam_result Optimizer::step(const sof_adam_slice& s, const sof_adam_hparams& hp, void* stream) {
    sof_adam_result r{};
    check(plugin_->adam_step(ctx_, &s, &hp, &r, stream), "adam_step");
    return r;
}

sof_adam_result Optimizer::step_multi(const sof_adam_slice* s, const sof_adam_hparams* hp,
                                      int count, void* stream) {
    sof_adam_result r{};
    check(plugin_->adam_step_multi(ctx_, s, hp, count, &r, stream), "adam_step_multi");
    return r;
}

void Optimizer::rollback(const sof_adam_slice& s, const sof_adam_hparams& hp, void* stream) {
    check(plugin_->adam_rollback(ctx_, &s, &hp, stream), "adam_rollback");
}

sof_adam_result Optimizer::grad_stats(const void* grad, sof_dtype dtype, int64_t n, float scale,
                                      void* stream) {
    sof_adam_result r{};
    check(plugin_->grad_stats(ctx_, grad, dtype, n, scale, &r, stream), "grad_stats");
    return r;
}

void Optimizer::step_multi_async(const sof_adam_slice* s, const sof_adam_hparams* hp, int count,
                                 sof_adam_result* result_dev, void* stream) {
    check(plugin_->adam_step_multi(ctx_, s, hp, count, result_dev, stream), "adam_step_multi");
}

} // namespace sof::optim
