// ZeRO-3 memory plan inputs (see memory.h): the engine's plan on one rank's shard layout.
#include "zero/memory.h"

#include <algorithm>

#include "offload/common.h"
#include "zero/shard.h"

namespace sof::zero {

offload::MemoryPlanInputs sharded_plan_inputs(const config::Config& cfg,
                                              const model::ParamLayout& layout, int shard_ranks,
                                              bool work_bf16, int rank) {
    if (shard_ranks <= 1)
        return offload::memory_plan_inputs(
            cfg, layout, offload::engine_buckets(cfg, layout, offload::stat_pieces(layout)),
            work_bf16);
    model::ParamLayout shard =
        zero::make_shard_layout(layout, zero::make_shard_map(layout, shard_ranks, rank));
    offload::MemoryPlanInputs in = offload::memory_plan_inputs(
        cfg, shard, offload::engine_buckets(cfg, shard, offload::stat_pieces(shard)), work_bf16);
    in.shard_ranks = shard_ranks;
    const zero::ShardMap map = zero::make_shard_map(layout, shard_ranks, rank);
    for (size_t s : map.slice)
        in.zero3_slice = std::max(in.zero3_slice, s);
    return in;
}

} // namespace sof::zero
