// Output files (see output_file.h): non-blocking open and an fstat check; the target check of
// writers that rename a temporary file over their path.
#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/input_file.h"

namespace sof::core {

int open_output(const std::string& path, int flags, const char* what, bool allow_char_device) {
    const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) {
        const int e = errno;
        if (e == ENXIO) // O_WRONLY on a FIFO without a reader
            SOF_FAIL(Io,
                     "cannot write %s '%s': it is a FIFO (not a regular file); remove it or "
                     "choose another path",
                     what, path.c_str());
        SOF_FAIL(Io, "cannot write %s '%s': %s (check that its directory exists and is writable)",
                 what, path.c_str(), std::strerror(e));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        SOF_FAIL(Io, "cannot write %s '%s': %s", what, path.c_str(), std::strerror(e));
    }
    if (!S_ISREG(st.st_mode) && !(allow_char_device && S_ISCHR(st.st_mode))) {
        ::close(fd);
        SOF_FAIL(Io,
                 "cannot write %s '%s': it is %s (not a regular file); remove it or choose "
                 "another path",
                 what, path.c_str(), mode_kind(st.st_mode));
    }
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

void check_output_target(const std::string& path, const char* what) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return; // missing (or unreachable: the write says why)
    if (!S_ISREG(st.st_mode))
        SOF_FAIL(Io,
                 "cannot write %s '%s': it exists and is %s (not a regular file); remove it or "
                 "choose another path",
                 what, path.c_str(), mode_kind(st.st_mode));
}

} // namespace sof::core
