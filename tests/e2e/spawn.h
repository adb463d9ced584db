// A superoffload process driven by a test: started with fork/exec (stdout and stderr into one
// pipe), its output read while it runs, signals sent to it, its exit status collected.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sof::test {

class Spawned {
  public:
    // Runs build/bin/superoffload with `args` in `cwd` (Open MPI allowed as root, 1 OpenMP thread).
    Spawned(const std::string& cwd, const std::vector<std::string>& args);
    ~Spawned(); // kills the process (SIGKILL) if it still runs
    Spawned(const Spawned&) = delete;
    Spawned& operator=(const Spawned&) = delete;

    pid_t pid() const { return pid_; }
    // Reads output until it contains `needle` (true) or the process ends / timeout_s passes.
    bool wait_for(const std::string& needle, double timeout_s);
    void signal(int sig);
    // Reads the rest of the output and reaps the process; returns the raw waitpid status.
    int wait();
    const std::string& output() const { return out_; }

  private:
    int read_some(int timeout_ms); // 1 read data, 0 nothing within the timeout, -1 end of output
    pid_t pid_ = -1;
    int fd_ = -1;
    bool reaped_ = false;
    std::string out_;
};

} // namespace sof::test
