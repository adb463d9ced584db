// printf-style formatting into std::string (GCC 12 has no <format>).
// Used for every error message and log line.
#pragma once

#include <cstdarg>
#include <string>

namespace sof::core {

std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrfmt(const char* fmt, va_list ap);

// Human-readable byte count: "1.50 GiB".
std::string format_bytes(double bytes);

} // namespace sof::core
