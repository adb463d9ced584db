// Rank-aware logging implementation.
// Lines are written with one fputs so lines from different ranks do not interleave mid-line.
#include "core/log.h"

#include <cstdarg>

#include "core/strfmt.h"

namespace sof::core {

void Log::info(const char* fmt, ...) const {
    if (rank_ != 0 || level_ < LogLevel::Info) return;
    va_list ap;
    va_start(ap, fmt);
    std::string s = vstrfmt(fmt, ap) + "\n";
    va_end(ap);
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
}

void Log::debug(const char* fmt, ...) const {
    if (rank_ != 0 || level_ < LogLevel::Debug) return;
    va_list ap;
    va_start(ap, fmt);
    std::string s = "debug: " + vstrfmt(fmt, ap) + "\n";
    va_end(ap);
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
}

void Log::warn(const char* fmt, ...) const {
    va_list ap;
    va_start(ap, fmt);
    std::string s = strfmt("[rank %d] warning: ", rank_) + vstrfmt(fmt, ap) + "\n";
    va_end(ap);
    std::fputs(s.c_str(), stderr);
}

void Log::all(const char* fmt, ...) const {
    va_list ap;
    va_start(ap, fmt);
    std::string s = strfmt("[rank %d] ", rank_) + vstrfmt(fmt, ap) + "\n";
    va_end(ap);
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
}

} // namespace sof::core
