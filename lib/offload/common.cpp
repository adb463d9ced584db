// Shared step arithmetic of the plain path and the engine (see common.h).
#include "offload/common.h"

#include <cmath>

#include "core/error.h"
#include "kernels/grad_stats.h"
#include "optim/sof_optim_check.h"

namespace sof::offload {

std::vector<int64_t> stat_pieces(const model::ParamLayout& layout) {
    std::vector<int64_t> b;
    for (const model::TensorInfo& t : layout.tensors)
        for (size_t off = 0; off < t.numel; off += kernels::kStatPiece)
            b.push_back(static_cast<int64_t>(t.offset + off));
    b.push_back(static_cast<int64_t>(layout.num_params));
    return b;
}

NormResult reduce_norm(const std::vector<device::GradStats>& piece_stats, StatReducer* reducer) {
    double sum = 0.0;
    bool bad = false;
    for (const device::GradStats& s : piece_stats) {
        sum += s.sumsq;
        bad |= s.nonfinite != 0;
    }
    if (reducer) reducer->combine(&sum, &bad);
    NormResult r;
    r.norm = std::sqrt(sum);
    r.nonfinite = bad || !std::isfinite(r.norm);
    return r;
}

float clip_coefficient(double norm, float clip) {
    if (clip <= 0.0f) return 1.0f;
    float coef = clip / (static_cast<float>(norm) + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

sof_optim_hparams adam_hparams(const config::Config& cfg, float lr, int64_t step, bool decay,
                               float grad_scale) {
    const config::OptimizerConfig& oc = cfg.optimizer;
    return optim::make_hparams(lr, oc.beta1, oc.beta2, oc.eps, decay ? oc.weight_decay : 0.0f, step,
                               oc.type == config::AdamMode::AdamW ? SOF_ADAM_ADAMW : SOF_ADAM_L2,
                               oc.bias_correction, grad_scale, cfg.train.seed);
}

void check_formats(const optim::Optimizer& opt, const StateFormat& f) {
    if (!opt.supports(f.moments))
        SOF_FAIL(Config,
                 "optimizer plugin '%s' does not step %s moments (optimizer.state_dtype): "
                 "choose another optimizer.plugin or state_dtype",
                 opt.info().name.c_str(), optim::state_format_name(f.moments));
    if (!opt.supports_param(f.master))
        SOF_FAIL(Config,
                 "optimizer plugin '%s' does not step %s master params "
                 "(optimizer.master_dtype): choose another optimizer.plugin or master_dtype",
                 opt.info().name.c_str(), f.master == SOF_DTYPE_BF16 ? "bf16" : "fp32");
}

size_t inject_offset(const model::ParamLayout& layout) {
    return layout.offset_of(model::TensorKind::Lnfw, 0);
}

std::unique_ptr<optim::Optimizer> load_host_optimizer(const config::OptimizerConfig& oc,
                                                      int threads) {
    return optim::Optimizer::load(oc.plugin_dir, oc.plugin, SOF_TARGET_HOST, threads);
}

} // namespace sof::offload
