// Helpers for the optimizer plugin tests: aligned buffers, seeded data, ulp distance, and the
// list of (plugin, variant) pairs that can run here (every variant of cpu_adam is forced in turn).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "optim/adam_ref.h"
#include "optim/optimizer.h"

namespace sof::test {

// 64-byte aligned buffer of T with `pad` extra elements in front (to test misaligned slices).
template <typename T> class ABuf {
  public:
    ABuf() = default;
    explicit ABuf(int64_t n, int64_t pad = 0) : n_(n), pad_(pad) {
        size_t bytes = (static_cast<size_t>(n + pad) * sizeof(T) + 63) / 64 * 64 + 64;
        mem_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
        std::memset(static_cast<void*>(mem_.get()), 0, bytes);
    }
    T* data() { return mem_.get() + pad_; }
    const T* data() const { return mem_.get() + pad_; }
    T& operator[](int64_t i) { return data()[i]; }
    const T& operator[](int64_t i) const { return data()[i]; }
    int64_t size() const { return n_; }
    void copy_from(const ABuf& o) { std::memcpy(data(), o.data(), sizeof(T) * n_); }

  private:
    struct Free {
        void operator()(T* p) const { std::free(p); }
    };
    std::unique_ptr<T, Free> mem_;
    int64_t n_ = 0, pad_ = 0;
};

// Units in the last place between two floats (0 for identical bits; NaN == NaN).
inline int64_t ulp_distance(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return 0;
    if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? static_cast<int64_t>(INT32_MIN) - ia : ia;
    int64_t lb = ib < 0 ? static_cast<int64_t>(INT32_MIN) - ib : ib;
    return la > lb ? la - lb : lb - la;
}

// One optimizer state (p, g, m, v) with seeded contents typical of training.
struct AdamData {
    int64_t n;
    ABuf<float> p, m, v, g32;
    ABuf<uint16_t> g16; // bf16 grads
    AdamData(int64_t n_, uint64_t seed, bool warm) : n(n_), p(n_), m(n_), v(n_), g32(n_), g16(n_) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::uniform_real_distribution<float> ud(0.0f, 1.0f);
        for (int64_t i = 0; i < n; i++) {
            p[i] = 0.5f * nd(rng);
            m[i] = warm ? 0.01f * nd(rng) : 0.0f;
            v[i] = warm ? 1e-4f * ud(rng) : 0.0f;
            g32[i] = 0.02f * nd(rng);
            g16[i] = core::f32_to_bf16(g32[i]);
        }
    }
    void new_grads(uint64_t seed) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t i = 0; i < n; i++) {
            g32[i] = 0.02f * nd(rng);
            g16[i] = core::f32_to_bf16(g32[i]);
        }
    }
    const void* grad(sof_dtype d) const {
        return d == SOF_DTYPE_F32 ? static_cast<const void*>(g32.data()) : g16.data();
    }
};

// A plugin to test, optionally with SOF_CPU_ADAM_VARIANT forced.
struct PluginCase {
    std::string name;
    std::string force; // value for SOF_CPU_ADAM_VARIANT, "" = none
    std::string label() const { return force.empty() ? name : name + "/" + force; }
};

inline void apply_force(const PluginCase& pc) {
    if (pc.force.empty())
        unsetenv("SOF_CPU_ADAM_VARIANT");
    else
        setenv("SOF_CPU_ADAM_VARIANT", pc.force.c_str(), 1);
}

// Host-target plugins in SOF_PLUGIN_DIR that score > 0 here; cpu_adam once per variant this CPU
// runs. CUDA-target plugins are skipped with a message (tests/cuda covers them on a GPU).
inline std::vector<PluginCase> host_plugin_cases() {
    std::vector<PluginCase> out;
    unsetenv("SOF_CPU_ADAM_VARIANT");
    for (const auto& pi : optim::list_plugins(SOF_PLUGIN_DIR)) {
        if (pi.target != SOF_TARGET_HOST) {
            MESSAGE("skipping " << pi.name << ": CUDA target (score " << pi.score
                                << "); conformance on a GPU runs in tests/cuda");
            continue;
        }
        if (pi.score <= 0) {
            MESSAGE("skipping " << pi.name << ": scores 0 here (" << pi.description << ")");
            continue;
        }
        if (pi.name != "cpu_adam") {
            out.push_back({pi.name, ""});
            continue;
        }
        for (const char* v : {"scalar", "avx2", "avx512"}) {
            setenv("SOF_CPU_ADAM_VARIANT", v, 1);
            bool ok = false;
            for (const auto& q : optim::list_plugins(SOF_PLUGIN_DIR))
                if (q.name == "cpu_adam" && q.score > 0) ok = true;
            if (ok)
                out.push_back({pi.name, v});
            else
                MESSAGE("cpu_adam variant " << std::string(v)
                                            << " not supported by this CPU: not tested here");
        }
        unsetenv("SOF_CPU_ADAM_VARIANT");
    }
    return out;
}

inline std::unique_ptr<optim::Optimizer> load_case(const PluginCase& pc, int threads) {
    apply_force(pc);
    auto opt = optim::Optimizer::load(SOF_PLUGIN_DIR, pc.name, SOF_TARGET_HOST, threads);
    unsetenv("SOF_CPU_ADAM_VARIANT");
    return opt;
}

// cpu_adam forced to its scalar path (loaded with 2 threads) and its vector variants this CPU
// runs: the pair the vector-vs-scalar bitwise tests compare (scalar null or vector empty: none).
struct CpuAdamVariants {
    std::unique_ptr<optim::Optimizer> scalar;
    std::vector<PluginCase> vector;
};
inline CpuAdamVariants cpu_adam_variants() {
    CpuAdamVariants c;
    for (const auto& pc : host_plugin_cases()) {
        if (pc.name != "cpu_adam") continue;
        if (pc.force == "scalar")
            c.scalar = load_case(pc, 2);
        else
            c.vector.push_back(pc);
    }
    return c;
}

// No plugin steps bitwise like adam_ref_elem (cpu_adam uses FMA and one divide, see
// plugins/cpu_adam/cpu_adam_kernels.h): steps are compared with the reference within the
// documented tolerance. Plugins whose step runs the same arithmetic in every vector lane and
// scalar tail of every variant: any slicing, thread count and variant give bitwise equal results.
inline bool variant_and_slice_bitwise(const std::string& name) {
    return name == "cpu_adam";
}

} // namespace sof::test
