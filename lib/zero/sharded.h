// Data parallelism over the rank context: ZeRO-3 (each rank updates one shard of the flat
// parameters; units all-gathered just in time, grads reduce-scattered per unit) and ZeRO-0
// (replicated, grads all-reduced), both wrapping the single-rank update path (plain or engine).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "zero/shard.h"
#include "offload/updater.h"
#include "rank/context.h"

namespace sof::zero {

// Builds the update path for cfg.parallel.zero_stage over every rank of ctx (a 1-rank job gets
// the plain path or engine itself). `full` must outlive it. Wrapped paths expose whole-model
// weights and grads to the model; collectives run on ctx.lane(). model_bf16: the model reads bf16
// weights (offload::bf16_working_weights, the trainer's ModelOptions::bf16): the engine keeps
// bf16 working weights, and ZeRO-3 gathers them as they are into bf16 slots.
std::unique_ptr<offload::Updater> make_parallel_updater(const config::Config& cfg,
                                                        const model::ParamLayout& full,
                                                        rank::Context& ctx, const core::Log& log,
                                                        core::Trace* trace, bool model_bf16);

// This rank's part of the state, for sharded checkpoints: the shard map and the real
// (non-padding) elements of params / exp_avg / exp_avg_sq (map.real_size each).
struct ShardState {
    zero::ShardMap map;
    std::vector<float> params, exp_avg, exp_avg_sq;
    int64_t opt_step = 0;
    // Native state formats (bf16 master, q8 moments): get_shard fills `native` (the rank's
    // engine state as kept, over its shard layout, padding included) instead of the fp32
    // vectors; set_shard takes it when native_valid.
    bool native_valid = false;
    offload::NativeState native;
};

// Implemented by both wrappers (and used by the trainer for checkpoints).
class ShardAccess {
  public:
    virtual ~ShardAccess() = default;
    virtual const zero::ShardMap& shard_map() const = 0;
    virtual void get_shard(ShardState* s) = 0;       // rank-local
    virtual void set_shard(const ShardState& s) = 0; // rank-local; s.map must equal shard_map()
};

} // namespace sof::zero
