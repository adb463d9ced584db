// The memory a ZeRO-3 rank's engine plans: the engine's inputs on that rank's shard layout, for
// the planner and the trainer's memory report (the wrapper's own slots:
// offload::zero3_memory_plan).
#pragma once

#include "config/config.h"
#include "model/layout.h"
#include "offload/memory_plan.h"
#include "zero/shard.h"

namespace sof::zero {

// Inputs for `rank` of a model of `layout` sharded over `shard_ranks` ZeRO-3 ranks: the engine on
// that rank's shard layout (shard.h: every unit padded and cut 1/N), as the ZeRO-3 path
// builds it. The slices are equal, but the tensor boundaries inside them are not: bucket cuts and
// statistic pieces, so a few KiB of buffers, differ from rank to rank. shard_ranks 1 gives
// offload::memory_plan_inputs(cfg, layout, offload::engine_buckets(...), work_bf16). Placement uses
// gpu_tail_buckets / interleave_k as given (resolve `auto` first). zero3_slice and
// zero3_block_slice are set for the wrapper's own slots (offload::zero3_memory_plan), which
// offload::make_memory_plan does not include: they are not engine buffers.
// The largest unit slice of `map`, or with blocks_only that of the transformer blocks (units
// 1..L; every unit when there are no blocks): the sizes of the wrapper's slots.
size_t max_slice(const ShardMap& map, bool blocks_only);

offload::MemoryPlanInputs sharded_plan_inputs(const config::Config& cfg,
                                              const model::ParamLayout& layout, int shard_ranks,
                                              bool work_bf16, int rank = 0);

} // namespace sof::zero
