// Builds the update path the deck asks for: the plain path (offload.enabled: false) or the
// SuperOffload engine (offload.enabled: true) on the device from the deck's device section.
#pragma once

#include <memory>

#include "config/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "model/layout.h"
#include "offload/updater.h"

namespace sof::offload {

// cfg must have its `auto` (-1) offload values resolved (train::Trainer runs the planner first);
// an unresolved value that matters throws core::Error (Internal). trace may be null.
std::unique_ptr<Updater> make_updater(const config::Config& cfg, const model::ParamLayout& layout,
                                      const core::Log& log, core::Trace* trace);

} // namespace sof::offload
