// Host-side handle on one optimizer plugin (dlopen + ABI version check + selection by name/score).
// The offload engine and the plain path call plugins only through this class.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optim/sof_optim_abi.h"

namespace sof::optim {

struct PluginInfo {
    std::string name;    // "cpu_adam"
    std::string path;    // absolute path of the shared object
    std::string variant; // "avx512", "sve", "sm_90", ...
    int score = 0;       // 0 = cannot run here
    sof_target target = SOF_TARGET_HOST;
    std::string description;
    std::string unusable; // why it cannot be used here ("" = usable): dlopen error, ABI, score 0
    bool loadable = true; // dlopen and the SOF_OPTIM_ENTRY symbol worked
    bool abi_ok = true;   // built for this ABI version
};

// Directory searched for plugins: `dir` if non-empty, else $SOF_PLUGIN_DIR, else
// <directory of /proc/self/exe>/../plugins.
std::string plugin_dir(const std::string& dir);

// Every lib*.so in `dir`, with its score. Files that cannot be loaded (dlopen errors, no
// SOF_OPTIM_ENTRY symbol, another ABI version) are listed with score 0 and the reason in
// `unusable`, so "no plugin can run" messages say why each one was passed over.
std::vector<PluginInfo> list_plugins(const std::string& dir);

// The plugin Optimizer::load would load: `name` ("" or "auto": the highest score among plugins of
// `target`; else the name a plugin declares or its file's stem) in plugin_dir(dir), without
// creating it. Throws core::Error (Config) when the directory is missing, no such plugin is there
// (listing the ones found), it cannot be loaded, was built for another ABI version, computes on
// another target or scores 0 here. `check` calls it too (app/deck_checks.h).
PluginInfo find_plugin(const std::string& dir, const std::string& name, sof_target target);

// AdamW/Adam hyperparameters for one slice (fills struct_size).
sof_adam_hparams make_hparams(float lr, float beta1, float beta2, float eps, float weight_decay,
                              int64_t step, sof_adam_mode mode, bool bias_correction,
                              float grad_scale);

// A slice; outputs default to in place (param_out = param, ...), lowp_out = nullptr; the moments
// exp_avg, exp_avg_sq are of state_dtype (fp32 or bf16).
sof_adam_slice make_slice(int64_t n, float* param, const void* grad, sof_dtype grad_dtype,
                          void* exp_avg, void* exp_avg_sq, sof_dtype state_dtype = SOF_DTYPE_F32);

class Optimizer {
  public:
    // Loads plugin `name` ("auto" = highest score among plugins of `target`) from plugin_dir(dir).
    // Throws core::Error (Config) when the plugin is missing (listing the ones found), scores 0
    // here, or was built for another ABI version (both numbers in the message).
    static std::unique_ptr<Optimizer> load(const std::string& dir, const std::string& name,
                                           sof_target target, int num_threads, int device = 0);
    ~Optimizer();
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    const PluginInfo& info() const { return info_; }

    // Each throws core::Error (Runtime) with the plugin's last_error when the status is not SOF_OK.
    sof_adam_result step(const sof_adam_slice& s, const sof_adam_hparams& hp,
                         void* stream = nullptr);
    sof_adam_result step_multi(const sof_adam_slice* s, const sof_adam_hparams* hp, int count,
                               void* stream = nullptr);
    void rollback(const sof_adam_slice& s, const sof_adam_hparams& hp, void* stream = nullptr);
    sof_adam_result grad_stats(const void* grad, sof_dtype dtype, int64_t n, float scale,
                               void* stream = nullptr);
    // CUDA plugins: variant of step_multi whose `result` is device memory (written async).
    void step_multi_async(const sof_adam_slice* s, const sof_adam_hparams* hp, int count,
                          sof_adam_result* result_dev, void* stream);

  private:
    Optimizer() = default;
    void check(sof_status st, const char* what);
    PluginInfo info_;
    void* handle_ = nullptr; // dlopen handle
    const sof_optim_plugin* plugin_ = nullptr;
    sof_optim_ctx* ctx_ = nullptr;
};

} // namespace sof::optim
