// The install-dependent deck checks shared by `check` and `train` (see deck_checks.h).
#include "deck_checks.h"

#include "core/error.h"
#include "device/device.h"
#include "optim/optimizer.h"
#include "plan/planner.h"

namespace sof::app {

namespace {

// "deck.yaml:12" (or "--set optimizer.plugin=x") for the first of keys set explicitly, else the
// deck's path
std::string where(const config::Config& cfg, std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
        auto it = cfg.origins.find(k);
        if (it != cfg.origins.end()) return it->second;
    }
    return cfg.deck_path.empty() ? std::string("deck") : cfg.deck_path;
}

} // namespace

void check_deck_against_install(const config::Config& cfg) {
    const std::string dev = device::device_type_problem(cfg.device);
    if (!dev.empty())
        core::throw_error(core::ErrorKind::Config, where(cfg, {"device.type"}) + ": " + dev);
    try {
        optim::find_plugin(cfg.optimizer.plugin_dir, cfg.optimizer.plugin, SOF_TARGET_HOST);
    } catch (const core::Error& e) {
        if (e.kind() != core::ErrorKind::Config) throw;
        core::throw_error(core::ErrorKind::Config,
                          where(cfg, {"optimizer.plugin", "optimizer.plugin_dir"}) + ": " +
                              e.what());
    }
    if (cfg.offload.enabled && !cfg.offload.hardware.empty()) { // the planner reads it
        try {
            plan::load_hardware(cfg.offload.hardware);
        } catch (const core::Error& e) {
            if (e.kind() != core::ErrorKind::Config) throw;
            core::throw_error(core::ErrorKind::Config,
                              where(cfg, {"offload.hardware"}) + ": offload.hardware: " + e.what());
        }
    }
}

} // namespace sof::app
