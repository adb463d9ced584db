// make_updater: plain path or SuperOffload engine, after checking that `auto` values are resolved.
#include "offload/updater_factory.h"

#include "core/error.h"
#include "offload/plain.h"

namespace sof::offload {

std::unique_ptr<Updater> make_updater(const config::Config& cfg, const model::ParamLayout& layout,
                                      const core::Log& log, core::Trace* trace) {
    if (!cfg.offload.enabled) return std::make_unique<PlainUpdater>(cfg, layout, log, trace);
    const config::OffloadConfig& oc = cfg.offload;
    if (oc.gpu_tail_buckets < 0)
        SOF_FAIL(Internal, "offload.gpu_tail_buckets is still 'auto' (%d) when the engine is built: "
                           "the planner (plan::resolve_auto) must resolve it first",
                 oc.gpu_tail_buckets);
    if (oc.weights == config::WeightsPolicy::Auto)
        SOF_FAIL(Internal, "offload.weights is still 'auto' when the engine is built: the planner "
                           "(plan::resolve_auto) must resolve it first");
    if (oc.schedule == config::Schedule::Interleaved && oc.interleave_k < 1)
        SOF_FAIL(Internal, "offload.interleave_k is still 'auto' (%d) with schedule interleaved "
                           "when the engine is built: the planner must resolve it first",
                 oc.interleave_k);
    SOF_FAIL(Config, "offload.enabled: true needs the SuperOffload engine, which this build of "
                     "lib/offload does not contain yet; set offload.enabled: false");
}

} // namespace sof::offload
