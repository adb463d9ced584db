// Opening output files safely: never blocking on the way (an existing FIFO with no reader) and
// never writing into, or renaming over, something that is not a regular file.
#pragma once

#include <string>

namespace sof::core {

// Opens `path` for writing with `flags` (O_WRONLY or O_RDWR and any of O_CREAT, O_TRUNC, O_APPEND;
// O_NONBLOCK and O_CLOEXEC are added for the open, O_NONBLOCK is cleared again) and checks with
// fstat that it is a regular file or, with allow_char_device, a character device (/dev/null,
// /dev/full). Returns the descriptor. Throws Io "cannot write <what> '<path>': <why>" with the fix:
// an existing FIFO, socket, directory or (unless allowed) device is refused, never waited on.
int open_output(const std::string& path, int flags, const char* what,
                bool allow_char_device = false);

// For writers that create a temporary file and rename it over `path`: throws Io when `path`
// exists and is not a regular file (a rename would silently replace a FIFO or a device node, or
// fail on a directory). A missing path is fine.
void check_output_target(const std::string& path, const char* what);

} // namespace sof::core
