// Helpers for end-to-end tests: run the superoffload program, capture output and exit status,
// write small decks and files into a per-test scratch directory.
#pragma once

#include <string>

namespace sof::test {

struct RunResult {
    int exit_code = -1;    // WEXITSTATUS, or -1 when killed by a signal
    bool signaled = false; // true when the program died of a signal (a crash)
    std::string output;    // stdout and stderr together
};

// Runs `build/bin/superoffload <args>` in `cwd` (a shell command line; quote as needed).
RunResult run_superoffload(const std::string& args, const std::string& cwd);

// Runs a shell command line in `cwd` with the same environment (e.g. an mpirun of the program:
// SOF_BINARY_DIR "/bin/superoffload" is its path).
RunResult run_command(const std::string& cmdline, const std::string& cwd);

// A fresh scratch directory under the build tree for test `name`.
std::string scratch_dir(const std::string& name);

void write_text(const std::string& path, const std::string& text);

} // namespace sof::test
