// ZeRO-3 sharding of the flat parameter space: each unit padded to a multiple of the shard count
// and cut into equal slices, one per rank (FSDP-style per-unit flat parameters).
#pragma once

#include <cstddef>
#include <vector>

#include "model/layout.h"

namespace sof::zero {

using model::ParamLayout;

// Why per unit and padded 1/N: a unit is what forward/backward need at once, so one allgather of
// equal slices (MPI_Allgather, no counts) rebuilds it, one reduce-scatter of the unit's grads hands
// each rank its slice, and every rank holds the same number of elements (memory falls as 1/N
// exactly, up to < N padding elements per unit). Unit-aligned sharding (whole units per rank) would
// leave rank 0 with the embedding (a third of GPT-2 124M) and cannot split a unit larger than 1/N.
//
// Slices are multiples of kShardAlign elements (64 bytes) so every unit of a shard starts on a
// cache line: the optimizer's streaming stores need it, and the padding is < 16*N per unit.
constexpr size_t kShardAlign = 16;

// Unit u has n_u = unit_begin[u+1] - unit_begin[u] elements and slice size
// s_u = ceil(ceil(n_u / N) / 16) * 16 (s_u = n_u for N = 1).
// Rank r owns unit elements [r*s_u, (r+1)*s_u) of the padded unit (N*s_u elements); elements at
// or past n_u are padding (zero params, zero grads, never stepped to anything else).
struct ShardMap {
    int shards = 1;                  // N
    int rank = 0;                    // r
    std::vector<size_t> slice;       // (num_units) s_u
    std::vector<size_t> local_begin; // (num_units+1) unit u of this shard starts here (padded)
    std::vector<size_t> real_begin;  // (num_units+1) same, counting real (non-padding) elements
    size_t local_size = 0;           // sum of s_u: elements of this rank's shard, padding included
    size_t real_size = 0;            // real elements of this rank's shard

    int num_units() const { return static_cast<int>(slice.size()); }
    // Global flat range [first, last) of unit u owned by this rank (empty when all padding).
    size_t global_first(const ParamLayout& l, int u) const;
    size_t global_last(const ParamLayout& l, int u) const;
    // Real elements of unit u in this rank's slice (s_u, fewer in the last ranks, maybe 0).
    size_t real_count(const ParamLayout& l, int u) const;
};

// shards >= 1, 0 <= rank < shards. shards == 1 maps the whole layout (no padding).
ShardMap make_shard_map(const ParamLayout& full, int shards, int rank);

// The layout of this rank's shard as the update paths see it: units at local_begin, tensors are
// the pieces of the full tensors inside the rank's slices (same name, kind, layer, decay; offset
// and numel in shard coordinates; shape = {numel}), plus one "pad" tensor (decay off) per unit
// that has padding. cfg is the full model's. With shards == 1 it equals `full`.
ParamLayout make_shard_layout(const ParamLayout& full, const ShardMap& map);

// Copies between the full flat buffer (full.num_params) and a shard buffer (map.local_size,
// padding written as 0 by scatter, skipped by gather).
void shard_scatter(const ParamLayout& full, const ShardMap& map, const float* full_buf,
                   float* shard_buf);
void shard_gather(const ParamLayout& full, const ShardMap& map, const float* shard_buf,
                  float* full_buf);
// Real elements only (map.real_size), in unit order: the checkpoint form of a shard.
void shard_pack_real(const ParamLayout& full, const ShardMap& map, const float* shard_buf,
                     float* real_buf);
void shard_unpack_real(const ParamLayout& full, const ShardMap& map, const float* real_buf,
                       float* shard_buf);

} // namespace sof::zero
