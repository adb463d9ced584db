// Device scratch of one stream for the CUDA twins that need temporary memory (the column sums'
// partials, the embedding backward's plan, piece bounds given on the host): sized once, reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace sof::kernels {

// ---- what the CUDA twins ask for (host functions of the shapes: tested on the CPU) -------------

// Column sums (cuda/reduce.cuh): the rows in chunks of at least kColMinChunk rows and at most
// kColMaxChunks chunks (the chunk size depends on the row count only: deterministic sums), the
// columns in groups of kColGroup (one pair of launches per group), so the fp32 partials of one
// group, nout x chunks x group columns, never exceed colsum_scratch_max(nout).
constexpr int kColMinChunk = 64;
constexpr int kColMaxChunks = 128;
constexpr int kColGroup = 4096;
int colsum_chunk_rows(int rows); // rows per chunk (>= kColMinChunk)
int colsum_chunks(int rows);     // chunks (1..kColMaxChunks; 0 for rows <= 0)
size_t colsum_scratch_bytes(int nout, int rows, int cols);
size_t colsum_scratch_max(int nout); // the most colsum_scratch_bytes(nout, ., .) is for any shape

// The embedding backward's plan of N ids with nrows distinct ones: order (N), starts (nrows+1),
// rows (nrows), int32.
size_t embedding_scratch_bytes(int N, int nrows);
// Piece bounds handed over on the host (grad_prep with a std::vector): npieces+1 int64.
size_t bounds_scratch_bytes(size_t npieces);

// The mixture-of-experts ops over N rows, top K of E experts: moe_plan's [bad (1) | counts (one
// row of E per chunk of kMoePlanChunk (row, k) pairs)] int32; moe_aux_stats' column-sum partials
// (moe_aux_partials_bytes, 256-byte aligned) then 2N floats of row statistics; grouped_matmul's
// three device pointer arrays of up to E products.
constexpr int kMoePlanChunk = 256;
size_t moe_plan_scratch_bytes(int N, int K, int E);
size_t moe_aux_partials_bytes(int N, int E);
size_t moe_aux_scratch_bytes(int N, int E);
size_t grouped_scratch_bytes(int E);

// What a transformer driver reserves for micro-batches of up to max_rows positions: the most any
// op it runs asks for (column sums of one or two outputs over any shape, the embedding plan of
// max_rows ids, and with E > 0 experts (top K) the MoE ops' requests), so its ops never grow the
// scratch.
size_t driver_scratch_bytes(int max_rows, int E = 0, int K = 0);

// Allocation granularity of a scratch buffer.
constexpr size_t kScratchGranule = size_t{1} << 20;
// Capacity to hold after a request of `need` bytes while `have` are held: `have` when the request
// fits, else need rounded up to kScratchGranule and at least twice `have` (a grow synchronizes
// the stream; doubling bounds how often that can happen).
size_t scratch_capacity(size_t have, size_t need);

// One buffer reused by every op enqueued on one stream: an op takes it with get() and enqueues
// its kernels; stream order makes it free again for the next op. One host thread at a time
// enqueues on a stream (get + the op's launches), as everywhere in the runtime. The memory comes
// from `Memory` (the rank's Device: accounted like every device buffer). A request larger than
// the buffer grows it (drain, free, alloc): never on the hot path once reserve() was given the
// right size; grows() counts the times it happened anyway.
class Scratch {
  public:
    struct Memory {
        std::function<void*(size_t)> alloc; // device memory, 256-byte aligned; throws on failure
        std::function<void(void*)> free;
        std::function<void()> drain; // blocks until the stream's enqueued work has run
    };
    // what: names the buffer for the allocator ("kernel scratch (compute)"). Nothing is allocated
    // until reserve() or get() asks for bytes.
    Scratch(Memory mem, std::string what);
    ~Scratch(); // drains the stream, then frees
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    // At least `bytes` of scratch for the op about to be enqueued (op: its name, for errors).
    void* get(size_t bytes, const char* op);
    // Grows to at least `bytes` now (a driver's constructor: outside the hot path).
    void reserve(size_t bytes);
    size_t capacity() const;
    size_t peak() const; // largest request so far
    int grows() const;   // requests that grew the buffer (0 after a right-sized reserve)

  private:
    void grow_to(size_t bytes);
    Memory mem_;
    std::string what_;
    mutable std::mutex mu_;
    void* buf_ = nullptr;
    size_t cap_ = 0, peak_ = 0;
    int grows_ = 0;
};

// s->get(bytes, op), or core::Error (Internal) naming op when the Exec carries no scratch.
void* scratch_get(Scratch* s, size_t bytes, const char* op);

} // namespace sof::kernels
