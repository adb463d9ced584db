// Regular-file input (see input_file.h): non-blocking open, fstat check, exact positional reads.
#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace sof::core {

const char* mode_kind(unsigned mode) {
    const mode_t m = static_cast<mode_t>(mode);
    if (S_ISREG(m)) return "";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

std::string path_kind(const std::string& path) {
    struct stat ls {};
    if (::lstat(path.c_str(), &ls) != 0) return "missing";
    if (!S_ISLNK(ls.st_mode)) return mode_kind(ls.st_mode);
    std::string target(4096, '\0');
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    target.resize(n > 0 ? static_cast<size_t>(n) : 0);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return "a broken symbolic link to '" + target + "'";
    if (S_ISREG(st.st_mode)) return "";
    return "a symbolic link to '" + target + "', " + mode_kind(st.st_mode);
}

int open_regular(const std::string& path, uint64_t* size, std::string* why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        const int e = errno;
        *why = e == ENOENT ? "no such file" : e == EISDIR ? "it is a directory" : std::strerror(e);
        return -1;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        *why = std::strerror(errno);
        ::close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = S_ISDIR(st.st_mode)
                   ? std::string("it is a directory")
                   : std::string("it is ") + mode_kind(st.st_mode) + ", not a regular file";
        ::close(fd);
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    if (size) *size = static_cast<uint64_t>(st.st_size);
    return fd;
}

InputFile::InputFile(const std::string& path, const char* what) : path_(path) {
    std::string why;
    fd_ = open_regular(path, &size_, &why);
    if (fd_ < 0) SOF_FAIL(Io, "%s %s: %s", what, path.c_str(), why.c_str());
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(void* out, size_t bytes, uint64_t offset) const {
    char* p = static_cast<char*>(out);
    size_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            SOF_FAIL(Io, "cannot read %s: %s", path_.c_str(), std::strerror(errno));
        }
        if (n == 0)
            SOF_FAIL(Format,
                     "%s is truncated: needed %zu bytes at offset %llu but the file ends after "
                     "%zu of them (the file is incomplete or corrupt; use another copy)",
                     path_.c_str(), bytes, static_cast<unsigned long long>(offset), done);
        done += static_cast<size_t>(n);
    }
}

} // namespace sof::core
