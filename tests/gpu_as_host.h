// SOF_TEST_GPU_AS_HOST=1 (the ctest entries *_on_host, label harness): the whole-run GPU tests send
// their "cuda" runs to the host device, so their decks, tolerances and harness run without a GPU.
#pragma once

#include <cstdlib>
#include <string>

namespace sof::test {

inline bool gpu_as_host() {
    const char* v = std::getenv("SOF_TEST_GPU_AS_HOST");
    return v && std::string(v) == "1";
}

// The device type the GPU side of a test runs on: "cuda", or "host" under SOF_TEST_GPU_AS_HOST=1.
inline const char* gpu() {
    return gpu_as_host() ? "host" : "cuda";
}

} // namespace sof::test
