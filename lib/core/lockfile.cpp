// Advisory directory locks (see lockfile.h): flock(LOCK_EX | LOCK_NB) on a lock file inside the
// directory; the kernel drops the lock when the process dies, so a killed run never blocks the
// next.
#include "core/lockfile.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace sof::core {

namespace fs = std::filesystem;

std::string lock_owner_text() {
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown-host");
    return strfmt("pid=%ld host=%s", static_cast<long>(getpid()), host);
}

DirLock::DirLock(const std::string& dir, const std::string& what) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        SOF_FAIL(Io, "%s '%s' exists and is not a directory: give %s a directory path",
                 what.c_str(), dir.c_str(), what.c_str());
    fs::create_directories(dir, ec);
    if (ec)
        SOF_FAIL(Io, "cannot create %s '%s': %s (choose a writable path for %s)", what.c_str(),
                 dir.c_str(), ec.message().c_str(), what.c_str());
    path_ = (fs::path(dir) / kLockFileName).string();
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0644);
    if (fd < 0)
        SOF_FAIL(Io, "cannot create the lock file %s: %s (is %s '%s' writable?)", path_.c_str(),
                 std::strerror(errno), what.c_str(), dir.c_str());
    int rc;
    do {
        rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int e = errno;
        std::string holder;
        if (e == EWOULDBLOCK) {
            char buf[512] = {0};
            ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
            holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
            while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0'))
                holder.pop_back();
        }
        ::close(fd);
        if (e == EWOULDBLOCK)
            SOF_FAIL(Io,
                     "%s '%s' is in use by another superoffload run (%s, lock file %s): wait for "
                     "it to end, or give this run another %s",
                     what.c_str(), dir.c_str(), holder.empty() ? "holder unknown" : holder.c_str(),
                     path_.c_str(), what.c_str());
        SOF_FAIL(Io, "cannot lock %s: %s", path_.c_str(), std::strerror(e));
    }
    const std::string owner = lock_owner_text() + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, owner.data(), owner.size(), 0) != static_cast<ssize_t>(owner.size())) {
        int e = errno;
        ::close(fd);
        SOF_FAIL(Io, "cannot write the lock file %s: %s (is the disk full?)", path_.c_str(),
                 std::strerror(e));
    }
    fd_ = fd;
}

DirLock::~DirLock() {
    release();
}

DirLock::DirLock(DirLock&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) {
    o.fd_ = -1;
}

DirLock& DirLock::operator=(DirLock&& o) noexcept {
    if (this != &o) {
        release();
        path_ = std::move(o.path_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

void DirLock::release() {
    if (fd_ >= 0) ::close(fd_); // closing the last descriptor drops the flock
    fd_ = -1;
}

} // namespace sof::core
