// The offload planner (planner.h): make_plan is the one pass (pass.cpp) and, for a plan whose
// CPU step is exposed, the levers that close the gap (gap.cpp); resolve_auto writes it back.
#include "plan/planner.h"

#include "plan/gap.h"
#include "plan/pass.h"

namespace sof::plan {

Plan make_plan(const config::Config& cfg, const model::ArchConfig& model, const HardwareProfile& hw,
               int shard_ranks) {
    Plan p = plan_once(cfg, model, hw, shard_ranks);
    close_gap(p, cfg, model, hw, shard_ranks);
    return p;
}

void resolve_auto(config::Config& cfg, const Plan& p) {
    if (cfg.offload.weights == config::WeightsPolicy::Auto) cfg.offload.weights = p.weights;
    if (cfg.offload.rollback == config::Rollback::Auto) cfg.offload.rollback = p.rollback;
    if (cfg.offload.cast == config::CastAt::Auto) cfg.offload.cast = p.cast;
    if (cfg.offload.flow_grads == config::FlowGrads::Auto) cfg.offload.flow_grads = p.flow_grads;
    if (cfg.optimizer.state_dtype == config::StateDtype::Auto)
        cfg.optimizer.state_dtype = p.state_dtype;
    if (cfg.optimizer.master_dtype == config::MasterDtype::Auto)
        cfg.optimizer.master_dtype = p.master_dtype;
    if (cfg.offload.gpu_tail_buckets < 0) cfg.offload.gpu_tail_buckets = p.tail_buckets;
    if (cfg.offload.interleave_k < 1) cfg.offload.interleave_k = p.interleave_k;
}

} // namespace sof::plan
