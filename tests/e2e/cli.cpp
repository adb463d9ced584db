// End-to-end test helpers (see cli.h): popen the program with stderr merged into stdout.
// The environment allows Open MPI to run as root, as CI does.
#include "e2e/cli.h"

#include "launch.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace sof::test {

RunResult run_superoffload(const std::string& args, const std::string& cwd) {
    return run_command(program() + " " + args, cwd);
}

RunResult run_command(const std::string& cmdline, const std::string& cwd) {
    std::string cmd = "cd '" + cwd +
                      "' && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                      "OMP_NUM_THREADS=1 " +
                      cmdline + " 2>&1";
    RunResult r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("popen failed for: " + cmd);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        r.output.append(buf, n);
    int status = pclose(p);
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
        // the shell reports a child killed by signal N as exit code 128+N
        r.signaled = r.exit_code > 128;
    } else {
        r.signaled = true;
    }
    return r;
}

std::string scratch_dir(const std::string& name) {
    std::filesystem::path d = std::filesystem::path(SOF_BINARY_DIR) / "test-scratch" / name;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d.string();
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + path);
}

} // namespace sof::test
