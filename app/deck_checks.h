// What `check` and `train` both refuse about a deck beyond lib/config's own checks: the optimizer
// plugin it names (lib/optim's choice, from the plugin directory at hand), the device type this
// build offers, the hardware profile the planner reads. Messages name where the key was set (deck
// file:line or --set).
#pragma once

#include "config/config.h"

namespace sof::app {

// Throws core::Error (Config) "<file:line>: <what train would say>" for a plugin that is not
// installed, cannot be loaded or cannot run here (optim::find_plugin, host target: the one the
// deck's optimizer.plugin is loaded for), for device.type cuda in a build without CUDA, and for
// an offload.hardware profile the planner cannot read (offload.enabled).
void check_deck_against_install(const config::Config& cfg);

} // namespace sof::app
