// Scratch files and findings for the fuzz harnesses (see fuzz.h).
#include "fuzz.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

extern "C" __attribute__((weak)) void sof_fuzz_driver_note_accepted();

namespace sof::fuzz {

const std::string& scratch_dir() {
    static const std::string dir = [] {
        const char* t = std::getenv("TMPDIR");
        std::string d =
            std::string(t && *t ? t : "/tmp") + "/sof-fuzz-" + std::to_string(::getpid());
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::perror(path.c_str());
        std::abort();
    }
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, data + done, size - done);
        if (n <= 0) {
            std::perror(path.c_str());
            std::abort();
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd);
}

void note_accepted() {
    if (sof_fuzz_driver_note_accepted) sof_fuzz_driver_note_accepted();
}

void finding(const std::string& what) {
    std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

} // namespace sof::fuzz
