// Ulysses sequence parallelism: the model's SeqExchange hook as all-to-alls over the SP group, and
// the slice of each sequence that an SP rank holds.
#pragma once

#include <vector>

#include "comm/group.h"
#include "model/model.h"

namespace sof::sp {

class Ulysses : public model::SeqExchange {
  public:
    explicit Ulysses(comm::Group& sp) : g_(sp) {}
    int degree() const override { return g_.size(); }
    int index() const override { return g_.rank(); }
    // collective: all ranks of the SP group
    void to_heads(const float* in, float* out, int B, int Tl, int K, int X) override;
    // collective: all ranks of the SP group
    void to_tokens(const float* in, float* out, int B, int Tl, int K, int X) override;

  private:
    comm::Group& g_;
    std::vector<float> send_, recv_; // (P * B*Tl*K*X) each
};

// Positions [index*T/P, (index+1)*T/P) of every sequence: tokens (B, T) -> local (B, T/P).
void slice_sequence(const int* tokens, int* local, int B, int T, int P, int index);

// Throws a Config error naming the keys when seq_len % sp or world % sp fail (the heads over sp:
// model::validate).
void check_degrees(int seq_len, int world, int sp);

} // namespace sof::sp
