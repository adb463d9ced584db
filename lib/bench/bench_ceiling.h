// Memory ceiling of the Adam step for `superoffload bench adam`: Adam's streams (read p, g, m, v;
// write p, m, v and the 2-byte copy) with trivial arithmetic, in several access strategies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sof::bench {

// How the ceiling writes its outputs.
enum class CeilingStores {
    Ordinary,       // plain stores (destinations are read for ownership first when separate)
    Streaming,      // non-temporal stores interleaved with the loads
    StreamingStaged // each block of 256 results staged in L1, then streamed out in a burst
};

struct CeilingStrategy {
    CeilingStores stores = CeilingStores::Ordinary;
    int64_t prefetch = 0;     // software prefetch distance in elements (0 = none), p/g/m/v streams
    bool pin = false;         // each OpenMP thread pinned to one CPU of the process's mask
    std::string name() const; // e.g. "stream-staged pf1024 pinned"
};

// Every strategy the ceiling tries: 3 store kinds x prefetch {0, 512, 1024, 2048} x pin {off, on}
// (pinning only when the process may run on more than one CPU).
std::vector<CeilingStrategy> ceiling_strategies();

// The buffers of one ceiling pass: the same memory the plugin steps (so the same allocation,
// alignment, page size and first-touch placement). In place: po == p, mo == m, vo == v.
struct CeilingBuffers {
    int64_t n = 0;
    const float* p = nullptr; // (n) params, read
    const float* g = nullptr; // (n) grads (fp32), read
    const float* m = nullptr; // (n) exp_avg, read
    const float* v = nullptr; // (n) exp_avg_sq, read
    float* po = nullptr;      // (n) p + g
    float* mo = nullptr;      // (n) m + g
    float* vo = nullptr;      // (n) v + g
    uint16_t* lowp = nullptr; // (n) top 16 bits of po, or nullptr (no copy)
};

// Instruction set of the ceiling loops here: "avx512", "avx2" or "scalar" (ordinary stores only:
// the other strategies then run the scalar loop too).
const char* ceiling_isa();

// One pass over all n elements with `threads` OpenMP threads (static tiles of 8192 elements, as
// cpu_adam); returns the wall time in seconds. Streaming stores need 64-byte aligned outputs
// (lowp too); the caller guarantees it (bench buffers are 2 MiB aligned).
double run_ceiling(const CeilingBuffers& b, const CeilingStrategy& s, int threads);

} // namespace sof::bench
