// Spawned (see spawn.h): fork + execv with a pipe; poll(2) to read with a timeout.
#include "e2e/spawn.h"

#include "launch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>

namespace sof::test {

Spawned::Spawned(const std::string& cwd, const std::vector<std::string>& args) {
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
    std::string exe = SOF_BINARY_DIR "/bin/superoffload";
    std::vector<std::string> argv_s = {exe};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    if (emulated()) { // a cross build: the shell execs the emulator, which keeps this pid
        std::string line = "exec " + program();
        for (size_t i = 1; i < argv_s.size(); i++) {
            std::string q = "'";
            for (char c : argv_s[i])
                q += c == '\'' ? std::string("'\\''") : std::string(1, c);
            line += " " + q + "'";
        }
        exe = "/bin/sh";
        argv_s = {exe, "-c", line};
    }
    std::vector<char*> argv;
    for (std::string& a : argv_s)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        ::dup2(p[1], STDOUT_FILENO);
        ::dup2(p[1], STDERR_FILENO);
        ::close(p[0]);
        ::close(p[1]);
        if (::chdir(cwd.c_str()) != 0) ::_exit(126);
        ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        ::setenv("OMP_NUM_THREADS", "1", 1);
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(p[1]);
    fd_ = p[0];
}

Spawned::~Spawned() {
    if (!reaped_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int st = 0;
        ::waitpid(pid_, &st, 0);
    }
    if (fd_ >= 0) ::close(fd_);
}

int Spawned::read_some(int timeout_ms) {
    pollfd pf{fd_, POLLIN, 0};
    int r = ::poll(&pf, 1, timeout_ms);
    if (r <= 0) return 0; // timeout (or EINTR): nothing yet
    char buf[4096];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) return -1;
    out_.append(buf, static_cast<size_t>(n));
    return 1;
}

bool Spawned::wait_for(const std::string& needle, double timeout_s) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (out_.find(needle) == std::string::npos) {
        if (std::chrono::steady_clock::now() > end) return false;
        if (read_some(100) < 0) return out_.find(needle) != std::string::npos;
    }
    return true;
}

void Spawned::signal(int sig) {
    ::kill(pid_, sig);
}

int Spawned::wait() {
    int st = 0;
    // reap first (a helper process of MPI may hold the pipe open a little longer), then drain
    while (::waitpid(pid_, &st, WNOHANG) == 0)
        read_some(50);
    reaped_ = true;
    while (read_some(200) > 0) { // until end of output, or 200 ms of silence
    }
    return st;
}

} // namespace sof::test
