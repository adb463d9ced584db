// Helpers for the CUDA tests: skip-without-GPU main, RAII device buffers, seeded data.
// A test binary that finds no CUDA device prints why and exits 77 (ctest SKIP_RETURN_CODE).
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/dtype.h"

namespace sof::test {

constexpr int kSkipCode = 77;

// Returns an empty string when a CUDA device is usable, else the reason it is not.
inline std::string cuda_unavailable_reason() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    }
    if (count == 0) return "cudaGetDeviceCount reports 0 devices";
    return "";
}

inline void cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device buffer of `bytes` bytes, freed on destruction.
struct DevBuf {
    void* ptr = nullptr;
    size_t bytes = 0;
    explicit DevBuf(size_t b) : bytes(b) { cuda_ok(cudaMalloc(&ptr, b ? b : 1), "cudaMalloc"); }
    ~DevBuf() { cudaFree(ptr); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    template <class T> T* as() const { return static_cast<T*>(ptr); }
    template <class T> void upload(const std::vector<T>& h) {
        cuda_ok(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "H2D");
    }
    template <class T> std::vector<T> download(size_t count) const {
        std::vector<T> h(count);
        cuda_ok(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
        return h;
    }
};

// Small deterministic generator (splitmix64), uniform floats in [lo, hi).
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform(float lo, float hi) {
        return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    }
};

// Host copy of one slice's state: params, moments and grads (fp32 and their bf16/fp16 bits).
struct HostState {
    std::vector<float> p, m, v; // (n)
    std::vector<float> g32;     // (n) fp32 grads
    std::vector<uint16_t> g16;  // (n) bf16 or fp16 grads (bits)
};

inline HostState make_state(int64_t n, uint64_t seed, int32_t grad_dtype) {
    Rng r(seed);
    HostState h;
    h.p.resize(n), h.m.resize(n), h.v.resize(n), h.g32.resize(n), h.g16.resize(n);
    for (int64_t i = 0; i < n; i++) {
        h.p[i] = r.uniform(-1.0f, 1.0f);
        h.m[i] = r.uniform(-0.01f, 0.01f);
        h.v[i] = r.uniform(0.0f, 1e-4f);
        float g = r.uniform(-0.05f, 0.05f);
        h.g16[i] = grad_dtype == 2 ? core::f32_to_f16(g) : core::f32_to_bf16(g);
        h.g32[i] = g;
    }
    return h;
}

} // namespace sof::test
