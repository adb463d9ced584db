// Ulysses all-to-alls (see ulysses.h): pack per destination rank, one all-to-all, unpack. On
// device buffers the packing is strided row copies on the model's stream (kernels/copy.h) around a
// rank::DeviceComm all-to-all. Layouts: tokens side (B, Tl, K, P, X), heads side (B, P*Tl, K, X).
#include "sp/ulysses.h"

#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "kernels/copy.h"

namespace sof::sp {

namespace {
const char* at(const void* p, size_t elems, size_t elem) {
    return static_cast<const char*>(p) + elems * elem;
}
char* at(void* p, size_t elems, size_t elem) {
    return static_cast<char*>(p) + elems * elem;
}
} // namespace

Ulysses::Ulysses(rank::DeviceComm& dc, device::Stream& s)
    : dc_(dc), g_(dc.group()), d_(dc.device()), s_(s), ev_(d_.create_event()) {}

Ulysses::~Ulysses() = default;

void Ulysses::rows(void* dst, size_t ldd, const void* src, size_t lds, size_t nrows, size_t width) {
    const size_t e = elem_;
    d_.launch(s_, "ulysses rows", [=](const kernels::Exec& ex) {
        if (e == sizeof(float))
            kernels::copy_rows(ex, static_cast<float*>(dst), ldd, static_cast<const float*>(src),
                               lds, nrows, width);
        else
            kernels::copy_rows(ex, static_cast<uint16_t*>(dst), ldd,
                               static_cast<const uint16_t*>(src), lds, nrows, width);
    });
}

void Ulysses::prepare(const void* in, const void* out, void* recv, size_t elem, size_t chunk) {
    if (elem != sizeof(float) && elem != sizeof(uint16_t))
        SOF_FAIL(Internal, "ulysses: %zu-byte elements (fp32 or bf16 only)", elem);
    const size_t bytes = static_cast<size_t>(g_.size()) * chunk * elem;
    auto overlap = [bytes](const void* a, const void* b) {
        const char* x = static_cast<const char*>(a);
        const char* y = static_cast<const char*>(b);
        return x < y + bytes && y < x + bytes;
    };
    if (overlap(in, out) || overlap(in, recv) || overlap(out, recv))
        SOF_FAIL(Internal, "ulysses: the exchange's input, output and receive buffers overlap");
    elem_ = elem;
    scratch_ = recv;
}

void Ulysses::exchange(const void* send, size_t chunk) {
    d_.record(*ev_, s_);
    if (elem_ == sizeof(float))
        dc_.alltoall(static_cast<const float*>(send), static_cast<float*>(scratch_), chunk,
                     ev_.get());
    else
        dc_.alltoall(static_cast<const uint16_t*>(send), static_cast<uint16_t*>(scratch_), chunk,
                     ev_.get());
}

void Ulysses::finish() {
    if (d_.host_accessible()) d_.synchronize(s_);
}

// out serves as the send buffer: chunk j = channel group j of every local row; the received
// chunk i (rank i's tokens) goes to positions i*Tl ..
void Ulysses::to_heads(const void* in, void* out, void* recv, size_t elem, int B, int Tl, int K,
                       int X) {
    const size_t P = static_cast<size_t>(g_.size()), x = static_cast<size_t>(X);
    const size_t rows_n = static_cast<size_t>(B) * Tl * K, chunk = rows_n * x;
    const size_t tkx = static_cast<size_t>(Tl) * K * x; // one sequence's tokens of one chunk
    prepare(in, out, recv, elem, chunk);
    for (size_t j = 0; j < P; j++)
        rows(at(out, j * chunk, elem), x, at(in, j * x, elem), P * x, rows_n, x);
    exchange(out, chunk);
    for (size_t i = 0; i < P; i++)
        rows(at(out, i * tkx, elem), P * tkx, at(scratch_, i * chunk, elem), tkx,
             static_cast<size_t>(B), tkx);
    finish();
}

// chunk j = positions j*Tl .. of this rank's head group; the received chunk i (head group i of
// this rank's tokens) goes to channel group i of every local row
void Ulysses::to_tokens(const void* in, void* out, void* recv, size_t elem, int B, int Tl, int K,
                        int X) {
    const size_t P = static_cast<size_t>(g_.size()), x = static_cast<size_t>(X);
    const size_t rows_n = static_cast<size_t>(B) * Tl * K, chunk = rows_n * x;
    const size_t tkx = static_cast<size_t>(Tl) * K * x;
    prepare(in, out, recv, elem, chunk);
    for (size_t j = 0; j < P; j++)
        rows(at(out, j * chunk, elem), tkx, at(in, j * tkx, elem), P * tkx, static_cast<size_t>(B),
             tkx);
    exchange(out, chunk);
    for (size_t i = 0; i < P; i++)
        rows(at(out, i * x, elem), P * x, at(scratch_, i * chunk, elem), x, rows_n, x);
    finish();
}

void slice_sequence(const int* tokens, int* local, int B, int T, int P, int index) {
    const int tl = T / P;
    for (int b = 0; b < B; b++)
        std::memcpy(local + static_cast<size_t>(b) * tl,
                    tokens + static_cast<size_t>(b) * T + static_cast<size_t>(index) * tl,
                    static_cast<size_t>(tl) * sizeof(int));
}

void check_degrees(const model::ArchConfig& m, int seq_len, int world, int sp) {
    if (sp < 1) SOF_FAIL(Config, "parallel.sp = %d must be >= 1", sp);
    model::validate(m, sp, seq_len);
    if (world % sp != 0)
        SOF_FAIL(Config,
                 "parallel.sp = %d does not divide the %d ranks of this job (world = DP x SP): "
                 "launch a multiple of %d ranks or change parallel.sp",
                 sp, world, sp);
}

} // namespace sof::sp
