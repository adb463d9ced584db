// Error type and checking helpers (see error.h).
// Throwing is the only way library code reports failure; nothing here exits the process.
#include "core/error.h"

namespace sof::core {

const char* error_kind_name(ErrorKind kind) {
    switch (kind) {
    case ErrorKind::Usage:
        return "usage error";
    case ErrorKind::Config:
        return "config error";
    case ErrorKind::Io:
        return "I/O error";
    case ErrorKind::Format:
        return "format error";
    case ErrorKind::Runtime:
        return "runtime error";
    case ErrorKind::Internal:
        return "internal error";
    }
    return "error";
}

void throw_error(ErrorKind kind, const std::string& msg) {
    throw Error(kind, msg);
}

void throw_check_failed(const char* file, int line, const char* cond, const std::string& msg) {
    throw Error(ErrorKind::Runtime,
                strfmt("%s:%d: check '%s' failed: %s", file, line, cond, msg.c_str()));
}

} // namespace sof::core
