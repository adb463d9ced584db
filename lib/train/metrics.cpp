// JSONL metrics writer (see metrics.h).
// Non-finite numbers are written as null so every line stays valid JSON.
#include "train/metrics.h"

#include <cmath>

#include "core/error.h"

namespace sof::train {

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), append ? "a" : "w");
    if (!f_)
        SOF_FAIL(
            Io, "cannot open metrics file '%s' for writing (check train.metrics / runtime.out_dir)",
            path.c_str());
}

MetricsWriter::~MetricsWriter() {
    if (f_) std::fclose(f_);
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
    std::fputs(line.c_str(), f_);
    std::fflush(f_);
}

} // namespace sof::train
