// ZeRO-3 shard maps and shard layouts (see shard.h): per-unit padded 1/N slices of the flat
// parameter space, and the copies between full buffers, shard buffers and checkpoint shards.
#include "zero/shard.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::zero {

using model::TensorInfo;
using model::TensorKind;

namespace {
size_t unit_size(const ParamLayout& l, int u) {
    return l.unit_begin[static_cast<size_t>(u) + 1] - l.unit_begin[static_cast<size_t>(u)];
}
} // namespace

size_t ShardMap::global_first(const ParamLayout& l, int u) const {
    size_t n = unit_size(l, u);
    size_t a = std::min(static_cast<size_t>(rank) * slice[static_cast<size_t>(u)], n);
    return l.unit_begin[static_cast<size_t>(u)] + a;
}

size_t ShardMap::global_last(const ParamLayout& l, int u) const {
    size_t n = unit_size(l, u);
    size_t b = std::min(static_cast<size_t>(rank + 1) * slice[static_cast<size_t>(u)], n);
    return l.unit_begin[static_cast<size_t>(u)] + b;
}

size_t ShardMap::real_count(const ParamLayout& l, int u) const {
    return global_last(l, u) - global_first(l, u);
}

ShardMap make_shard_map(const ParamLayout& full, int shards, int rank) {
    if (shards < 1 || rank < 0 || rank >= shards)
        SOF_FAIL(Internal, "make_shard_map: rank %d of %d shards is out of range", rank, shards);
    ShardMap m;
    m.shards = shards;
    m.rank = rank;
    const int nu = full.num_units();
    m.slice.resize(static_cast<size_t>(nu));
    m.local_begin.assign(static_cast<size_t>(nu) + 1, 0);
    m.real_begin.assign(static_cast<size_t>(nu) + 1, 0);
    for (int u = 0; u < nu; u++) {
        size_t n = unit_size(full, u);
        size_t s = (n + static_cast<size_t>(shards) - 1) / static_cast<size_t>(shards);
        if (shards > 1) s = (s + kShardAlign - 1) / kShardAlign * kShardAlign;
        m.slice[static_cast<size_t>(u)] = s;
        m.local_begin[static_cast<size_t>(u) + 1] = m.local_begin[static_cast<size_t>(u)] + s;
        m.real_begin[static_cast<size_t>(u) + 1] =
            m.real_begin[static_cast<size_t>(u)] + m.real_count(full, u);
    }
    m.local_size = m.local_begin.back();
    m.real_size = m.real_begin.back();
    return m;
}

ParamLayout make_shard_layout(const ParamLayout& full, const ShardMap& map) {
    if (map.shards == 1) return full;
    ParamLayout s;
    s.cfg = full.cfg;
    const int nu = full.num_units();
    for (int u = 0; u < nu; u++) {
        const size_t lb = map.local_begin[static_cast<size_t>(u)];
        s.unit_begin.push_back(lb);
        s.unit_first_tensor.push_back(s.tensors.size());
        const size_t a = map.global_first(full, u), b = map.global_last(full, u);
        for (const TensorInfo& t : full.tensors) {
            if (t.unit != u) continue;
            size_t x = std::max(a, t.offset), y = std::min(b, t.offset + t.numel);
            if (x >= y) continue;
            TensorInfo p = t;
            p.offset = lb + (x - a);
            p.numel = y - x;
            p.shape = {static_cast<int>(p.numel)};
            s.tensors.push_back(std::move(p));
        }
        size_t real = b - a, pad = map.slice[static_cast<size_t>(u)] - real;
        if (pad > 0) {
            TensorInfo p;
            p.name = core::strfmt("pad.unit%d", u);
            p.kind = TensorKind::Pad;
            p.layer = -1;
            p.unit = u;
            p.offset = lb + real;
            p.numel = pad;
            p.shape = {static_cast<int>(pad)};
            p.decay = false;
            s.tensors.push_back(std::move(p));
        }
    }
    s.unit_begin.push_back(map.local_size);
    s.unit_first_tensor.push_back(s.tensors.size());
    s.num_params = map.local_size;
    return s;
}

void shard_scatter(const ParamLayout& full, const ShardMap& map, const float* full_buf,
                   float* shard_buf) {
    for (int u = 0; u < map.num_units(); u++) {
        size_t a = map.global_first(full, u), n = map.real_count(full, u);
        float* dst = shard_buf + map.local_begin[static_cast<size_t>(u)];
        std::memcpy(dst, full_buf + a, n * sizeof(float));
        std::fill(dst + n, dst + map.slice[static_cast<size_t>(u)], 0.0f);
    }
}

void shard_gather(const ParamLayout& full, const ShardMap& map, const float* shard_buf,
                  float* full_buf) {
    for (int u = 0; u < map.num_units(); u++) {
        size_t a = map.global_first(full, u), n = map.real_count(full, u);
        std::memcpy(full_buf + a, shard_buf + map.local_begin[static_cast<size_t>(u)],
                    n * sizeof(float));
    }
}

void shard_pack_real(const ParamLayout& full, const ShardMap& map, const float* shard_buf,
                     float* real_buf) {
    for (int u = 0; u < map.num_units(); u++)
        std::memcpy(real_buf + map.real_begin[static_cast<size_t>(u)],
                    shard_buf + map.local_begin[static_cast<size_t>(u)],
                    map.real_count(full, u) * sizeof(float));
}

void shard_unpack_real(const ParamLayout& full, const ShardMap& map, const float* real_buf,
                       float* shard_buf) {
    for (int u = 0; u < map.num_units(); u++) {
        size_t n = map.real_count(full, u);
        float* dst = shard_buf + map.local_begin[static_cast<size_t>(u)];
        std::memcpy(dst, real_buf + map.real_begin[static_cast<size_t>(u)], n * sizeof(float));
        std::fill(dst + n, dst + map.slice[static_cast<size_t>(u)], 0.0f);
    }
}

} // namespace sof::zero
