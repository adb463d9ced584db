// Ulysses all-to-alls (see ulysses.h): pack per destination rank, one MPI_Alltoall, unpack.
// Layouts: tokens side (B, Tl, K, P, X), heads side (B, P*Tl, K, X).
#include "sp/ulysses.h"

#include <cstring>

#include "core/error.h"

namespace sof::sp {

void Ulysses::to_heads(const float* in, float* out, int B, int Tl, int K, int X) {
    const size_t P = static_cast<size_t>(g_.size());
    const size_t x = static_cast<size_t>(X), rows = static_cast<size_t>(B) * Tl * K;
    const size_t chunk = rows * x; // per destination: (B, Tl, K, X)
    send_.resize(P * chunk);
    recv_.resize(P * chunk);
    for (size_t j = 0; j < P; j++) // chunk j: channel group j of every local row
        for (size_t r = 0; r < rows; r++)
            std::memcpy(send_.data() + j * chunk + r * x, in + (r * P + j) * x, x * sizeof(float));
    g_.alltoall(send_.data(), recv_.data(), chunk);
    const size_t tl = static_cast<size_t>(Tl), k = static_cast<size_t>(K);
    for (size_t i = 0; i < P; i++) // chunk i: rank i's tokens -> positions i*Tl ..
        for (size_t b = 0; b < static_cast<size_t>(B); b++)
            for (size_t t = 0; t < tl; t++)
                std::memcpy(out + ((b * P * tl + i * tl + t) * k) * x,
                            recv_.data() + i * chunk + ((b * tl + t) * k) * x,
                            k * x * sizeof(float));
}

void Ulysses::to_tokens(const float* in, float* out, int B, int Tl, int K, int X) {
    const size_t P = static_cast<size_t>(g_.size());
    const size_t x = static_cast<size_t>(X), tl = static_cast<size_t>(Tl);
    const size_t k = static_cast<size_t>(K), rows = static_cast<size_t>(B) * tl * k;
    const size_t chunk = rows * x;
    send_.resize(P * chunk);
    recv_.resize(P * chunk);
    for (size_t j = 0; j < P; j++) // chunk j: positions j*Tl .. of this rank's head group
        for (size_t b = 0; b < static_cast<size_t>(B); b++)
            for (size_t t = 0; t < tl; t++)
                std::memcpy(send_.data() + j * chunk + ((b * tl + t) * k) * x,
                            in + ((b * P * tl + j * tl + t) * k) * x, k * x * sizeof(float));
    g_.alltoall(send_.data(), recv_.data(), chunk);
    for (size_t i = 0; i < P; i++) // chunk i: head group i of this rank's tokens
        for (size_t r = 0; r < rows; r++)
            std::memcpy(out + (r * P + i) * x, recv_.data() + i * chunk + r * x, x * sizeof(float));
}

void slice_sequence(const int* tokens, int* local, int B, int T, int P, int index) {
    const int tl = T / P;
    for (int b = 0; b < B; b++)
        std::memcpy(local + static_cast<size_t>(b) * tl,
                    tokens + static_cast<size_t>(b) * T + static_cast<size_t>(index) * tl,
                    static_cast<size_t>(tl) * sizeof(int));
}

void check_degrees(int seq_len, int world, int sp) {
    if (sp < 1) SOF_FAIL(Config, "parallel.sp = %d must be >= 1", sp);
    if (world % sp != 0)
        SOF_FAIL(Config,
                 "parallel.sp = %d does not divide the %d ranks of this job (world = DP x SP): "
                 "launch a multiple of %d ranks or change parallel.sp",
                 sp, world, sp);
    if (seq_len % sp != 0)
        SOF_FAIL(Config,
                 "train.seq_len = %d is not divisible by parallel.sp = %d (each sequence-parallel "
                 "rank holds seq_len/sp positions)",
                 seq_len, sp);
}

} // namespace sof::sp
