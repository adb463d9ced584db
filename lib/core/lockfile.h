// Advisory directory locks (flock on DIR/.superoffload.lock): one run per output or checkpoint
// directory. The lock file records the holder's pid and host so a refused run can name them.
#pragma once

#include <string>

namespace sof::core {

constexpr const char* kLockFileName = ".superoffload.lock";

class DirLock {
  public:
    DirLock() = default;
    // Creates `dir` if needed, then takes an exclusive non-blocking flock on dir/.superoffload.lock
    // and writes "pid=<pid> host=<host>" into it. `what` names the directory's role in messages
    // ("runtime.out_dir"). Throws Error(Io) when the directory cannot be created or used, and
    // Error(Io) naming the holder's pid and host when another process holds the lock.
    DirLock(const std::string& dir, const std::string& what);
    ~DirLock();
    DirLock(DirLock&& o) noexcept;
    DirLock& operator=(DirLock&& o) noexcept;
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;

    bool held() const { return fd_ >= 0; }
    const std::string& path() const { return path_; } // the lock file
    void release();                                   // closes the lock (idempotent)

  private:
    std::string path_;
    int fd_ = -1;
};

// "pid=123 host=node7" for this process (what a DirLock records).
std::string lock_owner_text();

} // namespace sof::core
