// Ulysses sequence parallelism: the model's SeqExchange hook as all-to-alls over the SP group on
// device buffers (rank::DeviceComm: direct, CUDA-aware or staged), and the slice of each sequence
// that an SP rank holds.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "device/device.h"
#include "model/model.h"
#include "rank/device_comm.h"

namespace sof::sp {

class Ulysses : public model::SeqExchange {
  public:
    // The all-to-alls of dc's group (the SP group) on buffers of dc's device. `s` is the stream
    // the model runs on: an exchange follows the work enqueued there before it and leaves `out`
    // ready for the work enqueued after it (on a host-accessible device, whose CPU twins run on
    // the calling thread: finished when the call returns).
    Ulysses(rank::DeviceComm& dc, device::Stream& s);
    ~Ulysses() override;
    Ulysses(const Ulysses&) = delete;
    Ulysses& operator=(const Ulysses&) = delete;

    int degree() const override { return g_.size(); }
    int index() const override { return g_.rank(); }

    // SeqExchange: device buffers of dc's device, `elem` bytes per element (4: fp32, 2: bf16);
    // in and out must not overlap. to_heads in (B, Tl, K, P, X) -> out (B, P*Tl, K, X);
    // to_tokens the inverse. recv (P*B*Tl*K*X elements): the caller's receive buffer.
    // collective: all ranks of the SP group
    void to_heads(const void* in, void* out, void* recv, size_t elem, int B, int Tl, int K,
                  int X) override;
    // collective: all ranks of the SP group
    void to_tokens(const void* in, void* out, void* recv, size_t elem, int B, int Tl, int K,
                   int X) override;

  private:
    // Enqueues dst[r*ldd + i] = src[r*lds + i] (elements of elem_ bytes) on s_.
    void rows(void* dst, size_t ldd, const void* src, size_t lds, size_t nrows, size_t width);
    // Checks the arguments (P*chunk elements each, no overlap); recv becomes scratch_.
    void prepare(const void* in, const void* out, void* recv, size_t elem, size_t chunk);
    // scratch_ (P*chunk) = the all-to-all of out (P*chunk) after the work enqueued on s_.
    void exchange(const void* send, size_t chunk);
    void finish();

    rank::DeviceComm& dc_;
    comm::Group& g_;
    device::Device& d_;
    device::Stream& s_;
    std::unique_ptr<device::Event> ev_;
    void* scratch_ = nullptr; // the call's receive buffer (the caller's, P*chunk elements)
    size_t elem_ = 4;
};

// Positions [index*T/P, (index+1)*T/P) of every sequence: tokens (B, T) -> local (B, T/P).
void slice_sequence(const int* tokens, int* local, int B, int T, int P, int index);

// The Ulysses degree of a job: the model over sp (heads, kv heads and seq_len divisible by sp:
// model::validate, the one check of these), then world % sp. A Config error naming the keys and
// both numbers.
void check_degrees(const model::ArchConfig& m, int seq_len, int world, int sp);

} // namespace sof::sp
