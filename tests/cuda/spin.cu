// The busy kernel of spin.h: one thread reads the GPU's global nanosecond timer (%globaltimer)
// until the requested time has passed, sleeping briefly between reads.
#include "spin.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace sof::test {

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin_kernel(unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < ns)
        __nanosleep(1000);
}

} // namespace

void spin_on_stream(void* stream, double us) {
    const auto ns = static_cast<unsigned long long>(us * 1000.0);
    spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(ns);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("spin_kernel launch: ") + cudaGetErrorString(e));
}

} // namespace sof::test
