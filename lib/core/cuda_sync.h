// SOF_CUDA_SYNC=1: the debugging switch that synchronizes after every CUDA op and names the op
// whose work failed (kernel dispatch, the CUDA device's launches and copies, gpu_adam).
#pragma once

#include <cstdlib>
#include <cstring>

namespace sof::core {

constexpr const char* kCudaSyncEnv = "SOF_CUDA_SYNC";

// Whether a value of SOF_CUDA_SYNC turns it on: anything but unset, "", "0", "false", "no", "off".
inline bool cuda_sync_value_on(const char* v) {
    if (!v || !*v) return false;
    for (const char* off : {"0", "false", "no", "off", "FALSE", "NO", "OFF"})
        if (std::strcmp(v, off) == 0) return false;
    return true;
}

// SOF_CUDA_SYNC as the process (or plugin) saw it at its first CUDA op; fixed from then on.
inline bool cuda_sync_mode() {
    static const bool on = cuda_sync_value_on(std::getenv(kCudaSyncEnv));
    return on;
}

// Appended to the message of an asynchronous CUDA fault (an illegal address, a failed launch, a
// device-side assert): such an error surfaces at a later call, not at the kernel that caused it.
constexpr const char* kCudaSyncHint =
    "; a kernel fault is reported by the next CUDA call after it, not by its own launch: rerun "
    "with SOF_CUDA_SYNC=1 CUDA_LAUNCH_BLOCKING=1 to name the op that faulted";

} // namespace sof::core
