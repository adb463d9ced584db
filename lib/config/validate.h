// Cross-field and file checks of a loaded deck (internal to the config module).
// Messages name the file and line where the offending key was set, or the --set that set it.
#pragma once

#include <map>
#include <string>

#include "config/config.h"
#include "config/fields.h"

namespace sof::config {

// Where each explicitly set key came from; keys at their default are absent.
using Origins = std::map<std::string, Origin>;

// Throws a Config error for the first inconsistency: divisibility, sizes, dependent keys,
// data globs that match nothing, missing init_from / resume / plugin_dir / hardware paths.
// files = false skips what needs the run's files (data globs, init_from, output directories): for
// `plan`, which reads only the shapes and policies.
void validate(const Config& cfg, const Origins& origins, const std::string& deck_name,
              bool files = true);

} // namespace sof::config
