// The parts of forward/backward every architecture shares: token checks, the per-block unit loops
// (acquire, run, release, unit_done; recompute in backward) and the mean loss. Internal to model/.
#pragma once

#include <functional>

#include "model/model.h"

namespace sof::model::detail {

// Ignored targets (loss masks): a target of -1 (data::kIgnoreTarget, PyTorch's ignore_index) is
// a position whose loss is 0, whose gradient is 0 (kernels/xent.h) and that the mean leaves out.
// The trainer scales backward by 1 / (counted targets of the global batch).
// Throws Runtime naming `who`, the position and the id when an input is outside [0, V) or a
// target is outside [0, V) and not -1 (ignored).
void check_tokens(const char* who, const int* inputs, const int* targets, int N, int V);

// Forward over the blocks: units 1..L acquired and released in order around block(l, params).
void forward_blocks(WeightSource& w, int L, const std::function<void(int, const float*)>& block);

// Backward over the blocks L-1..0: acquire unit 1+l, recompute(l, params) when `needs_recompute(l)`
// says so, block(l, params, grads), release, unit_done(1+l).
void backward_blocks(WeightSource& w, GradSink& sink, int L,
                     const std::function<bool(int)>& needs_recompute,
                     const std::function<void(int, const float*)>& recompute,
                     const std::function<void(int, const float*, float*)>& block);

// Mean of losses (N) over the positions whose target is not -1 (all of them when targets is
// null), summed in double in position order; 0 when no position counts.
float mean_loss(const float* losses, const int* targets, int N);

} // namespace sof::model::detail
