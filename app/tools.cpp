// The Python tools the commands call: script paths, shell quoting, running one and reading its
// output.
#include "tools.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace sof::app {

std::string script_path(const std::string& name) {
    namespace fs = std::filesystem;
    if (const char* d = std::getenv("SOF_SCRIPTS")) return std::string(d) + "/" + name;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
        if (fs::exists(p / "scripts" / name, ec)) return (p / "scripts" / name).string();
    return "scripts/" + name;
}

std::string sh_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s)
        q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string run_capture(const std::string& cmd, const char* what) {
    std::fflush(stdout);
    FILE* f = ::popen(cmd.c_str(), "r");
    if (!f) SOF_FAIL(Runtime, "%s: could not start: %s", what, cmd.c_str());
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        out.append(buf, n);
    const int st = ::pclose(f);
    if (st != 0)
        SOF_FAIL(Runtime, "%s failed (exit status %d; its message is above): %s", what,
                 WIFEXITED(st) ? WEXITSTATUS(st) : st, cmd.c_str());
    return out;
}

} // namespace sof::app
