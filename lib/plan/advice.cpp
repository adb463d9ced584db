// What a plan that does not fit the device could change: only the settings the deck does not
// have already (see advice.h).
#include "plan/advice.h"

#include <string>
#include <vector>

#include "model/activations.h"

namespace sof::plan {

namespace {

// "use a, b or c"
std::string join(const std::vector<std::string>& a) {
    std::string s = "use ";
    for (size_t i = 0; i < a.size(); i++)
        s += (i == 0 ? "" : i + 1 == a.size() ? " or " : ", ") + a[i];
    return s;
}

} // namespace

std::string device_memory_advice(const config::Config& cfg, config::WeightsPolicy weights,
                                 int tail) {
    const config::ModelConfig& m = cfg.model;
    std::vector<std::string> a;
    if (weights != config::WeightsPolicy::Flow) a.push_back("offload.weights: flow");
    if (tail > 0) a.push_back("fewer offload.gpu_tail_buckets");
    if (cfg.offload.schedule == config::Schedule::Interleaved)
        a.push_back("a larger offload.interleave_k");
    if (weights != config::WeightsPolicy::Flow) a.push_back("a smaller offload.bucket_mb");
    if (cfg.train.batch_size > 1) a.push_back("a smaller train.batch_size");
    if (!m.recompute)
        a.push_back("model.recompute: true");
    else if (!m.offload_checkpoints)
        a.push_back("model.offload_checkpoints: true");
    else if (m.device_checkpoints > 0)
        a.push_back("fewer model.device_checkpoints");
    if (m.loss_tile == model::kTileOff || m.mlp_tile == model::kTileOff)
        a.push_back("loss and MLP tiles (model.loss_tile, model.mlp_tile: auto)");
    a.push_back("a shorter train.seq_len");
    a.push_back("more ranks (ZeRO-3 shards the engine's state, parallel.sp the sequence)");
    return join(a);
}

std::string host_memory_advice(const config::Config& cfg, const Plan& p) {
    std::vector<std::string> a;
    const bool speculates = cfg.offload.schedule != config::Schedule::Synchronous &&
                            cfg.offload.stv != config::Stv::Off;
    if (p.rollback == config::Rollback::Exact && speculates)
        a.push_back("offload.rollback: inverse or auto (one state set)");
    if (p.state_dtype == config::StateDtype::FP32)
        a.push_back("optimizer.state_dtype: bf16, q8 or auto (2-byte or 8-bit moments)");
    else if (p.state_dtype == config::StateDtype::BF16)
        a.push_back("optimizer.state_dtype: q8 (8-bit moments)");
    if (p.master_dtype == config::MasterDtype::FP32 && cfg.train.dtype == config::Precision::BF16)
        a.push_back("optimizer.master_dtype: bf16 (stochastic rounding)");
    if (speculates && p.rollback == config::Rollback::Exact &&
        (p.state_dtype == config::StateDtype::Q8 || p.master_dtype == config::MasterDtype::BF16))
        a.push_back("offload.stv: false (one state set: q8 and bf16 masters roll back only "
                    "exactly)");
    if (cfg.train.dtype == config::Precision::BF16 && p.cast == config::CastAt::Device)
        a.push_back("offload.cast: host (bf16 grads)");
    if (cfg.model.recompute && cfg.model.offload_checkpoints) {
        a.push_back("more checkpoints on the device (model.device_checkpoints)");
        a.push_back("a shorter train.seq_len");
    }
    a.push_back("more ranks (ZeRO-3 shards the state)");
    return join(a);
}

} // namespace sof::plan
