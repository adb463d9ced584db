// The Python tools the commands call (scripts/prepare_data.py, scripts/hf_tokenize.py): where
// they are, and quoting their arguments for /bin/sh.
#pragma once

#include <string>

namespace sof::app {

// scripts/NAME of the source tree this program was built from (build/bin/..), or
// $SOF_SCRIPTS/NAME when that is set.
std::string script_path(const std::string& name);

// Single-quoted for /bin/sh.
std::string sh_quote(const std::string& s);

// Runs `cmd` through /bin/sh and returns its stdout; throws core::Error (Runtime) naming `what`
// and the exit status when it fails (its stderr goes to ours).
std::string run_capture(const std::string& cmd, const char* what);

} // namespace sof::app
