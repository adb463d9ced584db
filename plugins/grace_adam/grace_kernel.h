// grace_adam internals: the interface between the ABI layer (grace_adam.cpp, built without SVE
// flags) and the SVE kernels (grace_kernel_sve.cpp, built with +sve and -ffp-contract=off).
#pragma once

#include <cstdint>

#include "optim/adam_ref.h"
#include "optim/qstate.h"

namespace sof::grace_adam {

constexpr int64_t kRow = 64;     // statistics columns: element i adds to column i % 64 of its block
constexpr int64_t kBlock = 4096; // statistics block: 64 rows of 64 columns, summed column-wise
constexpr int64_t kTile = 16384; // OpenMP work unit (4 blocks); its partial sum is one tile entry
constexpr int kNoLowp = -1;

// Per-slice constants: exactly the reference's (optim::adam_consts, computed on the host).
using Consts = optim::AdamConsts;

// Buffers of one slice (indices are slice-relative).
struct Buffers {
    const void* p;     // (n) master params in (dtype pdt)
    const void* g;     // (n) grads of dtype gdt
    const void* m;     // (n) exp_avg in (format sdt)
    const void* v;     // (n) exp_avg_sq in (format sdt)
    void* po;          // (n) master params out (dtype pdt)
    void* mo;          // (n) exp_avg out (format sdt)
    void* vo;          // (n) exp_avg_sq out (format sdt)
    void* lowp;        // (n) low-precision copy (dtype ldt) or null
    int32_t pdt;       // sof_dtype of the master params: fp32, or bf16 (stochastic rounding)
    int32_t gdt;       // sof_dtype of g
    int32_t ldt;       // sof_dtype of lowp or kNoLowp
    int32_t sdt;       // sof_state_format of the moments: fp32, bf16 (widened, rounded to nearest
                       // even) or Q8 (decoded, each block re-quantized: optim/qstate.h)
    int32_t streaming; // 1: outputs are separate buffers, use non-temporal stores
    int32_t qb;        // Q8: elements per scale
    const float* ms;   // Q8: (ceil(n/qb)) scales of m in
    const float* vs;   // Q8: scales of v in
    float* mso;        // Q8: scales of m out
    float* vso;        // Q8: scales of v out
    int64_t index0;    // number of element 0 in the flat parameter space (stochastic rounding)
    uint64_t seed;     // stochastic rounding key (hparams.seed)
    int64_t step;      // and step
};

// Statistics of one tile: fp64 sum of squares of the scaled grads in the fixed block/column order,
// and a non-finite flag.
struct TileStats {
    double sumsq;
    int32_t nonfinite;
};

// Steps elements [begin, end) of a slice (begin is a multiple of kTile, end - begin <= kTile).
TileStats sve_step_tile(const Consts& c, const Buffers& b, int64_t begin, int64_t end);
// Arithmetic inverse of an in-place step over [begin, end).
void sve_rollback_tile(const Consts& c, const Buffers& b, int64_t begin, int64_t end);
// Statistics only over [begin, end) (grads scaled by `scale`).
TileStats sve_stats_tile(const void* g, int32_t gdt, float scale, int64_t begin, int64_t end);
// Active vector length in bits (svcntb() * 8).
int sve_vector_bits();

} // namespace sof::grace_adam
