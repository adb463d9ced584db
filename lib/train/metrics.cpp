// JSONL metrics writer (see metrics.h).
// Non-finite numbers are written as null so every line stays valid JSON.
#include "train/metrics.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/output_file.h"

namespace sof::train {

namespace {

[[noreturn]] void write_failed(const std::string& path, const char* what, int err) {
    SOF_FAIL(Io,
             "cannot %s metrics file '%s': %s (is the disk full? check train.metrics / "
             "runtime.out_dir)",
             what, path.c_str(), std::strerror(err));
}

} // namespace

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
    if (path.empty()) return;
    // truncated below, once the lock is ours; a FIFO or socket at the path is refused, not
    // opened (its reader may never come, and writes would block once its buffer is full);
    // character devices such as /dev/null are allowed
    const int fd = core::open_output(path, O_RDWR | O_CREAT | O_APPEND,
                                     "metrics file (train.metrics / runtime.out_dir)", true);
    f_ = ::fdopen(fd, "a+");
    if (!f_) {
        const int e = errno;
        ::close(fd);
        SOF_FAIL(Io, "cannot open metrics file '%s' for writing: %s", path.c_str(),
                 std::strerror(e));
    }
    // two runs appending to one metrics file (an explicit train.metrics shared by mistake) would
    // interleave their records: the file is locked like the run's directories (regular files only;
    // /dev/null and the like are shared harmlessly)
    struct stat st {};
    const bool regular = ::fstat(::fileno(f_), &st) == 0 && S_ISREG(st.st_mode);
    try {
        if (regular && ::flock(::fileno(f_), LOCK_EX | LOCK_NB) != 0)
            SOF_FAIL(Io,
                     "metrics file '%s' is in use by another superoffload run: give this run its "
                     "own train.metrics (or runtime.out_dir)",
                     path.c_str());
        if (!append && regular && ::ftruncate(::fileno(f_), 0) != 0)
            write_failed(path_, "truncate", errno);
        if (append && std::fseek(f_, -1, SEEK_END) == 0) {
            int last = std::fgetc(f_);
            std::fseek(f_, 0, SEEK_END);
            if (last != EOF && last != '\n' &&
                (std::fputc('\n', f_) == EOF || std::fflush(f_) != 0))
                write_failed(path_, "write", errno);
        }
    } catch (...) {
        std::fclose(f_); // a throwing constructor runs no destructor
        f_ = nullptr;
        throw;
    }
}

MetricsWriter::~MetricsWriter() {
    if (f_) std::fclose(f_); // close() reports errors; a destructor cannot
}

void MetricsWriter::write(const std::string& kind,
                          const std::vector<std::pair<std::string, double>>& fields) {
    if (!f_) return;
    std::string line = "{\"kind\":\"" + kind + "\"";
    for (const auto& [k, v] : fields) {
        line += ",\"" + k + "\":";
        if (!std::isfinite(v))
            line += "null";
        else if (v == std::floor(v) && std::fabs(v) < 9e15)
            line += core::strfmt("%lld", static_cast<long long>(v));
        else
            line += core::strfmt("%.9g", v);
    }
    line += "}\n";
    errno = 0;
    if (std::fputs(line.c_str(), f_) == EOF) write_failed(path_, "write", errno);
    if (std::fflush(f_) != 0) write_failed(path_, "write", errno);
}

void MetricsWriter::close() {
    if (!f_) return;
    std::FILE* f = f_;
    f_ = nullptr;
    errno = 0;
    if (std::fclose(f) != 0) write_failed(path_, "close", errno);
}

} // namespace sof::train
