// make_updater: plain path or SuperOffload engine; the engine checks that `auto` values are
// resolved.
#include "offload/updater_factory.h"

#include "core/error.h"
#include "offload/engine.h"
#include "offload/plain.h"

namespace sof::offload {

void Updater::get_native(NativeState*) {
    SOF_FAIL(Internal, "this update path does not export its state as kept (get_native)");
}
void Updater::set_native(const NativeState&) {
    SOF_FAIL(Internal, "this update path does not import its state as kept (set_native)");
}

std::unique_ptr<Updater> make_updater(const config::Config& cfg, const model::ParamLayout& layout,
                                      const core::Log& log, core::Trace* trace) {
    if (!cfg.offload.enabled) return std::make_unique<PlainUpdater>(cfg, layout, log, trace);
    return std::make_unique<Engine>(cfg, layout, log, trace);
}

} // namespace sof::offload
