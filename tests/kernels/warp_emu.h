// A host emulator of one CUDA thread block for the tensor-core attention's tile code
// (lib/kernels/cuda/flash_*.cuh): every GPU thread is a fiber running the same code, and the
// collectives (barriers, shuffles, ldmatrix, mma.sync, cp.async) are executed from the PTX ISA's
// layouts (ptx_isa.h) once all participants have arrived.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sof::ktest::emu {

struct Options {
    // Lockstep: every ready thread runs to its next collective, round after round (the warps
    // stay within one collective of each other). WarpAhead: one warp runs as far as it can (to a
    // barrier or its end) before the next starts, so a missing barrier shows as data not yet
    // written, or overwritten. reverse: the warps (and lanes) from the last to the first.
    enum class Schedule { Lockstep, WarpAhead } schedule = Schedule::Lockstep;
    bool reverse = false;
    bool late_copy = true; // cp.async lands at the wait (else at the issue)
    // Deliberate defects, for the tests that prove a wrong layout is caught:
    enum class Defect { None, LdsmIgnoresTrans, MmaBTransposed } defect = Defect::None;
};

struct Stats {
    long syncs = 0, shuffles = 0, ldsm = 0, mma = 0;
    long ldsm_conflicts = 0; // 8x8 matrices whose 8 row reads share a 16-byte bank group
    long cp_async = 0;
};

class Block;

// One emulated thread: the machine M of flash_tile.cuh.
class Thread {
  public:
    int tid() const { return tid_; }
    unsigned char* smem() const;
    void sync();
    float shfl_xor(float v, int mask);
    int shfl_up(int v, int delta);
    void atomic_max_shared(int* p, int v);
    void atomic_min_shared(int* p, int v);
    float exp2(float x) const;
    float log2(float x) const;
    uint32_t pack_bf16(float lo, float hi) const;
    void ldsm_x4(uint32_t (&r)[4], const unsigned char* p);
    void ldsm_x4_trans(uint32_t (&r)[4], const unsigned char* p);
    void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
    void cp_async16(unsigned char* dst, const void* src, bool valid);
    void cp_async4(unsigned char* dst, const void* src, bool valid);
    void cp_commit();
    void cp_wait_all();
    template <class T> T ld(const T* p) {
        check_global(p, sizeof(T), false);
        return *p;
    }
    template <class T> void st(T* p, T v) {
        check_global(p, sizeof(T), true);
        *p = v;
    }

  private:
    friend class Block;
    void check_global(const void* p, size_t n, bool write) const;
    void copy(unsigned char* dst, const void* src, int n, bool valid);
    Block* blk_ = nullptr;
    int tid_ = 0;
};

// A block of n threads with smem_bytes of shared memory (poisoned with 0xFF before each run).
class Block {
  public:
    Block(int threads, size_t smem_bytes, Options o = {});
    ~Block();
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    // Global memory the code may read (and write when writable); any other address throws.
    void add_global(const void* p, size_t bytes, bool writable);
    // Runs body on every thread until all return. Throws std::runtime_error on a barrier or warp
    // collective that not all participants reach (divergence, deadlock), an address outside the
    // registered global memory or the shared memory, a misaligned ldmatrix or cp.async.
    void run(const std::function<void(Thread&)>& body);
    const Stats& stats() const { return stats_; }

    struct Impl;

  private:
    friend class Thread;
    std::unique_ptr<Impl> impl_;
    Stats stats_;
};

} // namespace sof::ktest::emu
