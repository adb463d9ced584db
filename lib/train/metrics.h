// JSONL metrics file: one JSON object per line (step records, eval records, run summary).
// Written by rank 0 only; flushed per line so a killed run keeps what it logged.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sof::train {

class MetricsWriter {
  public:
    MetricsWriter() = default;
    // Opens (append when `append`, else truncate). Empty path = disabled.
    MetricsWriter(const std::string& path, bool append);
    ~MetricsWriter();
    MetricsWriter(const MetricsWriter&) = delete;
    MetricsWriter& operator=(const MetricsWriter&) = delete;

    bool enabled() const { return f_ != nullptr; }
    // Writes {"kind": kind, k1: v1, ...} with numbers formatted losslessly (%.9g / %lld).
    void write(const std::string& kind, const std::vector<std::pair<std::string, double>>& fields);

  private:
    std::FILE* f_ = nullptr;
};

} // namespace sof::train
