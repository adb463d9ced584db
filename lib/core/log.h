// Rank-aware logging: an object passed around (no global logger), prints on rank 0 by default.
// Errors from any rank go to stderr prefixed with the rank.
#pragma once

#include <cstdio>
#include <string>

namespace sof::core {

enum class LogLevel { Quiet = 0, Info = 1, Debug = 2 };

class Log {
  public:
    Log() = default;
    Log(int rank, LogLevel level) : rank_(rank), level_(level) {}

    int rank() const { return rank_; }
    LogLevel level() const { return level_; }
    void set_level(LogLevel l) { level_ = l; }

    // rank 0 only, to stdout
    void info(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
    void debug(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
    // any rank, to stderr, prefixed "[rank r] warning:"
    void warn(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
    // any rank, unconditional, to stdout ("[rank r] ...")
    void all(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));

  private:
    int rank_ = 0;
    LogLevel level_ = LogLevel::Info;
};

} // namespace sof::core
