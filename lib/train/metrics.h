// JSONL metrics file: one JSON object per line (step records, eval records, resume and stop
// markers, run summary). Written by rank 0 only; flushed per line so a killed run keeps what it
// logged. Every write, flush and close is checked: a full disk is an I/O error, not an empty file.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sof::train {

class MetricsWriter {
  public:
    MetricsWriter() = default;
    // Opens (append when `append`, else truncate). Empty path = disabled. When appending to a file
    // whose last line was cut (a killed run), a newline is added first so every line stays JSON.
    // A regular file is flock'ed while open: a second writer gets Error(Io). A FIFO, socket or
    // directory at the path is refused (Error(Io)), never waited on; character devices
    // (/dev/null) are allowed.
    MetricsWriter(const std::string& path, bool append);
    ~MetricsWriter();
    MetricsWriter(const MetricsWriter&) = delete;
    MetricsWriter& operator=(const MetricsWriter&) = delete;

    bool enabled() const { return f_ != nullptr; }
    // Writes {"kind": kind, k1: v1, ...} with numbers formatted losslessly (%.9g / %lld).
    // Throws Error(Io) naming the file when the line cannot be written and flushed.
    void write(const std::string& kind, const std::vector<std::pair<std::string, double>>& fields);
    // Closes the file, checking that everything reached it (Error(Io) otherwise). Idempotent.
    void close();

  private:
    std::string path_;
    std::FILE* f_ = nullptr;
};

} // namespace sof::train
