// Opening input files safely: regular files only, and never blocking on the way (a FIFO with no
// writer, a tape or terminal device): O_NONBLOCK on open, then fstat on the descriptor.
#pragma once

#include <cstdint>
#include <string>

namespace sof::core {

// What a file of this st_mode is, for messages: "a FIFO", "a socket", "a character device", "a
// block device", "a directory", "not a regular file" (anything else); "" for a regular file.
const char* mode_kind(unsigned mode);

// What `path` is when it is not a regular file, for messages: mode_kind's words, through symbolic
// links ("a symbolic link to '/dev/zero', a character device", "a broken symbolic link to 'x'"),
// or "missing"; "" for a regular file or a symbolic link to one. Never opens the path.
std::string path_kind(const std::string& path);

// Opens `path` read-only (O_NONBLOCK, O_CLOEXEC) and checks with fstat that it is a regular file.
// Returns the descriptor (O_NONBLOCK cleared again; regular files ignore it anyway) and its size,
// or -1 with `why` set: "no such file", "it is a directory", "it is a FIFO, not a regular file"
// (a socket, a character device, ...: mode_kind's words), or the OS reason.
int open_regular(const std::string& path, uint64_t* size, std::string* why);

// An open regular input file, closed on destruction. The constructor throws Io
// "<what> <path>: <why>" (e.g. "token shard data/a.bin: it is not a regular file (...)").
class InputFile {
  public:
    InputFile(const std::string& path, const char* what);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    int fd() const { return fd_; }
    uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }

    // Reads exactly `bytes` at `offset`; Io error on a read failure, Format error naming the path
    // when the file ends first ("truncated").
    void read_at(void* out, size_t bytes, uint64_t offset) const;

  private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

} // namespace sof::core
