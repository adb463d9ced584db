// Expected collective bytes per rank per optimizer step (ZeRO-3 / ZeRO-0 over the world, Ulysses
// over the SP group), computed from the same shard map the run uses, so measured == formula.
#pragma once

#include <string>

#include "model/layout.h"

namespace sof::plan {

struct CommVolume {
    double allgather = 0;      // bytes sent by one rank per step (ZeRO-3 weights)
    double reduce_scatter = 0; // (ZeRO-3 grads)
    double allreduce = 0;      // (ZeRO-0 grads)
    double alltoall = 0;       // (Ulysses activations)
    double total() const { return allgather + reduce_scatter + allreduce + alltoall; }
};

// Per rank and optimizer step, sent (= received) bytes of fp32 payload:
//  ZeRO-3 over N = world ranks, per micro-batch: forward all-gathers every unit, backward every
//    unit but the embeddings and the final LN (kept from the forward), reduce-scatter every
//    unit: each (N-1) x the padded slice (zero/shard.h). About (N-1)/N x (2 allgathers + 1
//    reduce-scatter) of the model. The allgathers move gather_bytes per element (2 when
//    train.dtype is bf16: the working weights are bf16 values), the reduce-scatters fp32.
//  ZeRO-0: one all-reduce per unit per step, 2 (N-1) x ceil(n_u / N) (reduce-scatter + gather).
//  Ulysses over P = sp: per layer and micro-batch 4 all-to-alls (q, k, v, attention output) of
//    B*T*C/P elements each, times (P-1)/P, in forward and the same in backward (recompute adds
//    the forward ones again for every block but the last, whose activations backward finds).
// B: sequences per data-parallel rank; T: the whole sequence.
CommVolume comm_per_step(const model::ParamLayout& layout, int world, int sp, int zero_stage, int B,
                         int T, int grad_accum, bool recompute, int gather_bytes = 4);

std::string describe_comm(const CommVolume& v, int world, int sp, int zero_stage);

} // namespace sof::plan
