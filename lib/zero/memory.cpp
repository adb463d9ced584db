// ZeRO-3 memory plan inputs (see memory.h): the engine's plan on one rank's shard layout.
#include "zero/memory.h"

#include <algorithm>

#include "offload/common.h"
#include "zero/shard.h"

namespace sof::zero {

size_t max_slice(const ShardMap& map, bool blocks_only) {
    const int U = map.num_units();
    const bool blocks = blocks_only && U > 2; // units 1..U-2 (a model without blocks: all)
    size_t m = 0;
    for (int u = blocks ? 1 : 0; u < (blocks ? U - 1 : U); u++)
        m = std::max(m, map.slice[static_cast<size_t>(u)]);
    return m;
}

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
    in.zero3_slice = max_slice(map, false);
    in.zero3_block_slice = max_slice(map, true);
    return in;
}

} // namespace sof::zero
