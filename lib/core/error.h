// Error type and checking macros shared by every module.
// Library code throws sof::core::Error; the app decides fatal_all vs fatal_one (see comm/fatal.h).
#pragma once

#include <stdexcept>
#include <string>

#include "core/strfmt.h"

namespace sof::core {

// What kind of failure, so the app can choose an exit code and tests can check the category.
enum class ErrorKind {
    Usage,    // bad command line
    Config,   // bad deck: unknown key, wrong type, out of range
    Io,       // missing/unreadable/unwritable file
    Format,   // a file exists but its contents are wrong (magic, version, size)
    Runtime,  // a failure while running (allocation, library call)
    Internal, // a bug in superoffload
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
  public:
    Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
    ErrorKind kind() const { return kind_; }

  private:
    ErrorKind kind_;
};

[[noreturn]] void throw_error(ErrorKind kind, const std::string& msg);
[[noreturn]] void throw_check_failed(const char* file, int line, const char* cond,
                                     const std::string& msg);

} // namespace sof::core

// SOF_CHECK(cond, fmt, ...): throws an Internal/Runtime error with file:line when cond is false.
#define SOF_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ::sof::core::throw_check_failed(__FILE__, __LINE__, #cond,                             \
                                            ::sof::core::strfmt(__VA_ARGS__));                     \
    } while (0)

// SOF_FAIL(kind, fmt, ...): throws an error of the given kind with a formatted message.
#define SOF_FAIL(kind, ...)                                                                        \
    ::sof::core::throw_error(::sof::core::ErrorKind::kind, ::sof::core::strfmt(__VA_ARGS__))
