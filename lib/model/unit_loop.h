// The parts of forward/backward every architecture shares: token checks, the per-block unit loops
// (acquire, run, release, unit_done; recompute in backward) and the mean loss. Internal to model/.
#pragma once

#include <functional>

#include "model/model.h"

namespace sof::model::detail {

// Throws Runtime naming `who`, the position and the id when an input/target is outside [0, V).
void check_tokens(const char* who, const int* inputs, const int* targets, int N, int V);

// Forward over the blocks: units 1..L acquired and released in order around block(l, params).
void forward_blocks(WeightSource& w, int L, const std::function<void(int, const float*)>& block);

// Backward over the blocks L-1..0: acquire unit 1+l, recompute(l, params) when `needs_recompute(l)`
// says so, block(l, params, grads), release, unit_done(1+l).
void backward_blocks(WeightSource& w, GradSink& sink, int L,
                     const std::function<bool(int)>& needs_recompute,
                     const std::function<void(int, const float*)>& recompute,
                     const std::function<void(int, const float*, float*)>& block);

// Mean of losses (N), summed in double in position order.
float mean_loss(const float* losses, int N);

} // namespace sof::model::detail
