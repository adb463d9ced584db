// The scratch sizes the CUDA twins ask for and the growth of kernels::Scratch (scratch.h): host
// code in every build, so the sizes and the grow rule are tested on the CPU.
#include "kernels/scratch.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/moe_aux.h"

namespace sof::kernels {

int colsum_chunk_rows(int rows) {
    if (rows <= 0) return kColMinChunk;
    const int per = (rows + kColMaxChunks - 1) / kColMaxChunks;
    return std::max(per, kColMinChunk);
}

int colsum_chunks(int rows) {
    if (rows <= 0) return 0;
    const int per = colsum_chunk_rows(rows);
    return (rows + per - 1) / per;
}

size_t colsum_scratch_bytes(int nout, int rows, int cols) {
    if (nout <= 0 || rows <= 0 || cols <= 0) return 0;
    return sizeof(float) * static_cast<size_t>(nout) * static_cast<size_t>(colsum_chunks(rows)) *
           static_cast<size_t>(std::min(cols, kColGroup));
}

size_t colsum_scratch_max(int nout) {
    return nout <= 0 ? 0
                     : sizeof(float) * static_cast<size_t>(nout) *
                           static_cast<size_t>(kColMaxChunks) * static_cast<size_t>(kColGroup);
}

size_t embedding_scratch_bytes(int N, int nrows) {
    if (N <= 0) return 0;
    return sizeof(int32_t) * (static_cast<size_t>(N) + 2 * static_cast<size_t>(nrows) + 1);
}

size_t bounds_scratch_bytes(size_t npieces) {
    return sizeof(int64_t) * (npieces + 1);
}

size_t moe_plan_scratch_bytes(int N, int K, int E) {
    const size_t pairs = static_cast<size_t>(std::max(N, 0)) * std::max(K, 0);
    const size_t chunks = (pairs + kMoePlanChunk - 1) / kMoePlanChunk;
    return sizeof(int) * (1 + chunks * static_cast<size_t>(std::max(E, 0)));
}

size_t moe_aux_partials_bytes(int N, int E) {
    return (colsum_scratch_bytes(1, N, moe_aux_stats_size(E)) + 255) / 256 * 256;
}

size_t moe_aux_scratch_bytes(int N, int E) {
    return moe_aux_partials_bytes(N, E) + sizeof(float) * 2 * static_cast<size_t>(std::max(N, 0));
}

size_t grouped_scratch_bytes(int E) {
    return 3 * sizeof(void*) * static_cast<size_t>(std::max(E, 0));
}

size_t driver_scratch_bytes(int max_rows, int E, int K) {
    // column sums take one (bias, rmsnorm) or two (layernorm) outputs; the embedding plan has at
    // most max_rows distinct ids
    size_t r = std::max(colsum_scratch_max(2), embedding_scratch_bytes(max_rows, max_rows));
    if (E > 0)
        r = std::max({r, moe_plan_scratch_bytes(max_rows, K, E), moe_aux_scratch_bytes(max_rows, E),
                      grouped_scratch_bytes(E)});
    return r;
}

size_t scratch_capacity(size_t have, size_t need) {
    if (need <= have) return have;
    const size_t want = std::max(need, 2 * have);
    return (want + kScratchGranule - 1) / kScratchGranule * kScratchGranule;
}

Scratch::Scratch(Memory mem, std::string what) : mem_(std::move(mem)), what_(std::move(what)) {
    SOF_CHECK(mem_.alloc && mem_.free && mem_.drain, "%s: incomplete memory hooks", what_.c_str());
}

Scratch::~Scratch() {
    if (!buf_) return;
    try {
        mem_.drain();
    } catch (...) { // a failed stream is reported by whoever synchronizes it next
    }
    mem_.free(buf_);
}

void Scratch::grow_to(size_t bytes) {
    const size_t cap = scratch_capacity(cap_, bytes);
    if (cap == cap_) return;
    if (buf_) {
        mem_.drain(); // ops enqueued before may still read the old buffer
        mem_.free(buf_);
        buf_ = nullptr;
        cap_ = 0;
    }
    buf_ = mem_.alloc(cap);
    cap_ = cap;
}

void* Scratch::get(size_t bytes, const char* op) {
    std::lock_guard<std::mutex> lk(mu_);
    peak_ = std::max(peak_, bytes);
    if (bytes > cap_) {
        try {
            grow_to(bytes);
        } catch (const core::Error& e) {
            SOF_FAIL(Runtime, "%s needs %zu bytes of %s: %s", op, bytes, what_.c_str(), e.what());
        }
        grows_++;
    }
    return buf_;
}

void Scratch::reserve(size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    if (bytes > cap_) grow_to(bytes);
}

size_t Scratch::capacity() const {
    std::lock_guard<std::mutex> lk(mu_);
    return cap_;
}

size_t Scratch::peak() const {
    std::lock_guard<std::mutex> lk(mu_);
    return peak_;
}

int Scratch::grows() const {
    std::lock_guard<std::mutex> lk(mu_);
    return grows_;
}

void* scratch_get(Scratch* s, size_t bytes, const char* op) {
    SOF_CHECK(s != nullptr,
              "%s (CUDA): the Exec carries no scratch (kernels::Scratch of its stream: see "
              "kernels/scratch.h; Device::launch and the transformer driver provide one)",
              op);
    return s->get(bytes, op);
}

} // namespace sof::kernels
