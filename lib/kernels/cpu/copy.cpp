// CPU twin of copy.h: memcpy per row (OpenMP over rows when there are many) and memset.
// Byte-exact, so any thread split gives the same result.
#include "kernels/copy.h"

#include <cstring>

namespace sof::kernels::cpu {

void copy_rows(void* dst, size_t ldd, const void* src, size_t lds, size_t rows, size_t width,
               size_t elem) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    const long n = static_cast<long>(rows);
#pragma omp parallel for schedule(static) if (n > 64)
    for (long r = 0; r < n; r++)
        std::memcpy(d + static_cast<size_t>(r) * ldd * elem,
                    s + static_cast<size_t>(r) * lds * elem, width * elem);
}

void zero(void* dst, size_t bytes) {
    std::memset(dst, 0, bytes);
}

} // namespace sof::kernels::cpu
