// Opening input files safely: regular files only, and never blocking on the way (a FIFO with no
// writer, a tape or terminal device): O_NONBLOCK on open, then fstat on the descriptor.
#pragma once

#include <cstdint>
#include <string>

namespace sof::core {

// Opens `path` read-only (O_NONBLOCK, O_CLOEXEC) and checks with fstat that it is a regular file.
// Returns the descriptor (O_NONBLOCK cleared again; regular files ignore it anyway) and its size,
// or -1 with `why` set: "no such file", "it is a directory", "it is not a regular file (a FIFO,
// socket or device)", or the OS reason.
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
