// The engine's memory plan (see memory_plan.h): the buffer list for a deck's modes and sizes, and
// the inputs for one rank (exact for the engine's own layout, sharded for the planner).
#include "offload/memory_plan.h"

#include <algorithm>

#include "core/strfmt.h"
#include "device/device.h"
#include "kernels/grad_stats.h"
#include "offload/common.h"

namespace sof::offload {

size_t MemoryPlan::total(MemSide side) const {
    size_t s = 0;
    for (const BufferSpec& b : buffers)
        if (b.side == side) s += mem_round(b.bytes);
    return s;
}

size_t MemoryPlan::total(MemSide side, MemKind kind) const {
    size_t s = 0;
    for (const BufferSpec& b : buffers)
        if (b.side == side && b.kind == kind) s += mem_round(b.bytes);
    return s;
}

int grad_ring_slots(const MemoryPlanInputs& in) {
    const size_t U = in.unit_numel.size();
    if (!in.flow || !in.ring_ok || in.grad_accum != 1 || U == 0) return 0;
    for (Placement p : in.bucket_place)
        if (p == Placement::Stream) return 0;
    std::vector<size_t> ub(U + 1, 0); // unit bounds
    for (size_t u = 0; u < U; u++)
        ub[u + 1] = ub[u] + in.unit_numel[u];
    auto unit_of = [&](size_t off) {
        return static_cast<size_t>(std::upper_bound(ub.begin(), ub.end(), off) - ub.begin()) - 1;
    };
    // per unit: the lowest ready unit of a bucket overlapping it, and a device bucket overlap
    std::vector<size_t> min_ready(U);
    std::vector<char> dev(U, 0);
    for (size_t u = 0; u < U; u++)
        min_ready[u] = u;
    size_t end = in.num_params;
    for (size_t i = 0; i < in.bucket_numel.size(); i++) { // backward order: descending offsets
        size_t begin = end - in.bucket_numel[i];
        if (in.bucket_numel[i] > 0) {
            size_t ready = unit_of(begin), last = unit_of(end - 1);
            for (size_t w = ready; w <= last; w++) {
                min_ready[w] = std::min(min_ready[w], ready);
                if (in.bucket_place[i] == Placement::Device) dev[w] = 1;
            }
        }
        end = begin;
    }
    // unit w > 0 holds a slot while units u in [min_ready(w), w] are written (to the end when a
    // device bucket overlaps it); unit 0 has its own slot
    std::vector<int> delta(U + 1, 0);
    for (size_t w = 1; w < U; w++) {
        size_t lo = dev[w] ? 0 : min_ready[w];
        delta[lo] += 1;
        delta[w + 1] -= 1;
    }
    int best = 0, live = 0;
    std::vector<int> at(U, 0);
    for (size_t u = 0; u < U; u++) { // prefix sums: live units other than 0 while u is written
        live += delta[u];
        at[u] = live;
    }
    for (size_t u = 0; u < U; u++)
        best = std::max(best, at[u]);
    int slots = 1 + best;
    if (static_cast<double>(slots) * static_cast<double>(in.max_unit) >=
        static_cast<double>(in.num_params))
        return 0; // a small model: the whole-model buffer is not larger
    return slots;
}

int stream_slot_count(int nstream) {
    return std::min(nstream, 2);
}

MemoryPlan make_memory_plan(const MemoryPlanInputs& in) {
    MemoryPlan plan;
    auto add = [&](Buf id, int index, MemSide side, MemKind kind, size_t bytes, std::string name) {
        if (bytes == 0) return;
        plan.buffers.push_back({id, index, side, kind, bytes, std::move(name)});
    };
    const size_t n = in.num_params;
    size_t max_host = 0, max_dev = 0, max_stream = 0, max_any = 0;
    int nstream = 0;
    for (size_t i = 0; i < in.bucket_numel.size(); i++) {
        size_t k = in.bucket_numel[i];
        max_any = std::max(max_any, k);
        switch (in.bucket_place[i]) {
        case Placement::Host:
            max_host = std::max(max_host, k);
            break;
        case Placement::Device:
            max_dev = std::max(max_dev, k);
            break;
        case Placement::Stream:
            max_stream = std::max(max_stream, k);
            nstream++;
            break;
        }
    }
    // weight flow builds the device's weights from the master at every fetch: no bf16 copy; bf16
    // working weights are written by the device step itself
    const bool work16 = in.bf16 && in.work_bf16;
    const bool device_lowp = in.bf16 && !in.flow && !work16;
    const bool bf16_grads = in.bf16 && in.cast_host; // grads cross the link as bf16
    const size_t es = in.state_bf16 ? 2 : 4;         // bytes per moment

    // Device memory (weight flow: the model's grads live in a device ring of units, or with
    // accumulation in pinned host memory).
    const int ring = grad_ring_slots(in);
    const bool pinned_grads = in.flow && ring == 0; // the host step reads them there
    if (ring == 0)
        add(Buf::DevGrads, 0, in.flow ? MemSide::Pinned : MemSide::Device, MemKind::Grads, n * 4,
            in.flow ? "fp32 grads (weight flow, pinned host)" : "fp32 grads (num_params)");
    for (int r = 0; r < ring; r++) {
        add(Buf::DevGradRing, r, MemSide::Device, MemKind::Grads, in.max_unit * 4,
            core::strfmt("grad ring slot %d (fp32 unit)", r));
    }
    if (!in.flow)
        add(Buf::DevWork, 0, MemSide::Device, MemKind::Weights, n * (work16 ? 2 : 4),
            work16 ? "bf16 working weights (stationary)" : "working weights (stationary)");
    add(Buf::DevStats, 0, MemSide::Device, MemKind::Staging, in.npieces * sizeof(device::GradStats),
        "grad statistics");
    add(Buf::DevBounds, 0, MemSide::Device, MemKind::Staging, (in.npieces + 1) * sizeof(int64_t),
        "grad statistic piece bounds");
    if (!in.flow && in.bf16 && max_host > 0) { // bf16 working weights: H2D straight into them
        if (!work16)
            add(Buf::DevStage16, 0, MemSide::Device, MemKind::Staging, max_host * 2,
                "H2D staging bf16");
        if (!in.cast_host)
            add(Buf::DevStage32, 0, MemSide::Device, MemKind::Staging, max_host * 4,
                "H2D staging fp32");
    }
    if (bf16_grads)
        add(Buf::DevGradStage16, 0, MemSide::Device, MemKind::Staging, max_any * 2,
            "D2H staging bf16 grads");
    if (device_lowp)
        add(Buf::DevLowp, 0, MemSide::Device, MemKind::Staging, std::max(max_dev, max_stream) * 2,
            "bf16 copy of device-stepped buckets");
    for (size_t i = 0; i < in.bucket_numel.size(); i++) {
        if (in.bucket_place[i] != Placement::Device) continue;
        size_t k = in.bucket_numel[i];
        int b = static_cast<int>(i);
        std::string w = core::strfmt("bucket %d", b);
        add(Buf::DevStateP, b, MemSide::Device, MemKind::State, k * 4,
            w + " fp32 master params (device-resident)");
        add(Buf::DevStateM, b, MemSide::Device, MemKind::State, k * es,
            w + " exp_avg (device-resident)");
        add(Buf::DevStateV, b, MemSide::Device, MemKind::State, k * es,
            w + " exp_avg_sq (device-resident)");
    }
    for (int s = 0; s < stream_slot_count(nstream); s++) {
        std::string w = core::strfmt("streaming slot %d", s);
        add(Buf::SlotP, s, MemSide::Device, MemKind::State, max_stream * 4, w + " fp32 params");
        add(Buf::SlotM, s, MemSide::Device, MemKind::State, max_stream * es, w + " exp_avg");
        add(Buf::SlotV, s, MemSide::Device, MemKind::State, max_stream * es, w + " exp_avg_sq");
    }
    if (in.flow) {
        int nslots = in.prefetch_layers + 3; // unit 0 held + current + prefetched
        for (int s = 0; s < nslots; s++) {
            std::string w = core::strfmt("weight-flow slot %d", s);
            add(Buf::FlowSlot32, s, MemSide::Device, MemKind::Weights, in.max_unit * 4,
                w + " (fp32)");
            if (in.bf16)
                add(Buf::FlowSlot16, s, MemSide::Device, MemKind::Weights, in.max_unit * 2,
                    w + " (bf16)");
        }
    }

    // Pinned host memory: the master state (two sets with exact rollback), the offloaded grads
    // (stationary; in weight flow the host step reads the model's pinned grads), statistics and
    // the bf16 ring of the host step's bf16 params (never a whole-model bf16 copy).
    int nsets = in.exact && in.speculate ? 2 : 1; // nothing to roll back without speculation
    for (int s = 0; s < nsets; s++) {
        std::string w = nsets > 1 ? core::strfmt(" (state set %d)", s) : std::string();
        add(Buf::HostParams, s, MemSide::Pinned, MemKind::State, n * 4, "fp32 master params" + w);
        add(Buf::HostExpAvg, s, MemSide::Pinned, MemKind::State, n * es, "exp_avg" + w);
        add(Buf::HostExpAvgSq, s, MemSide::Pinned, MemKind::State, n * es, "exp_avg_sq" + w);
    }
    if (!pinned_grads && bf16_grads)
        add(Buf::HostGrads16, 0, MemSide::Pinned, MemKind::Grads, n * 2, "offloaded grads (bf16)");
    else if (!pinned_grads)
        add(Buf::HostGrads, 0, MemSide::Pinned, MemKind::Grads, n * 4, "offloaded grads");
    add(Buf::HostStats, 0, MemSide::Pinned, MemKind::Staging,
        in.npieces * sizeof(device::GradStats), "grad statistics");
    if (!in.flow && in.bf16 && in.cast_host)
        for (int r = 0; r < 2; r++)
            add(Buf::HostPub16, r, MemSide::Pinned, MemKind::Staging, max_host * 2,
                core::strfmt("bf16 params H2D ring %d", r));
    add(Buf::HostNaN, 0, MemSide::Pinned, MemKind::Staging, sizeof(float), "NaN injection");
    return plan;
}

std::vector<Bucket> engine_buckets(const config::Config& cfg, const model::ParamLayout& layout,
                                   const std::vector<int64_t>& pieces) {
    const config::OffloadConfig& oc = cfg.offload;
    size_t elems = static_cast<size_t>(oc.bucket_mb * 1048576.0 / 4.0);
    std::vector<Bucket> b = make_buckets(layout, pieces, std::max<size_t>(elems, 1));
    place_buckets(b, oc.gpu_tail_buckets,
                  oc.schedule == config::Schedule::Interleaved ? oc.interleave_k : 0);
    return b;
}

static size_t max_unit_of(const model::ParamLayout& layout) {
    size_t m = 0;
    for (int u = 0; u < layout.num_units(); u++)
        m = std::max(m, layout.unit_begin[static_cast<size_t>(u) + 1] -
                            layout.unit_begin[static_cast<size_t>(u)]);
    return m;
}

static void set_modes(MemoryPlanInputs& in, const config::Config& cfg, bool work_bf16) {
    in.bf16 = cfg.train.dtype == config::Precision::BF16;
    in.flow = cfg.offload.weights == config::WeightsPolicy::Flow;
    in.cast_host = cfg.offload.cast == config::CastAt::Host;
    in.exact = cfg.offload.rollback != config::Rollback::Inverse; // auto unresolved: exact
    in.state_bf16 = cfg.optimizer.state_dtype == config::StateDtype::BF16;
    in.speculate = cfg.offload.schedule != config::Schedule::Synchronous &&
                   cfg.offload.stv != config::Stv::Off;
    in.ring_ok = cfg.offload.flow_grads != config::FlowGrads::Host;
    in.work_bf16 = work_bf16 && in.bf16;
    in.grad_accum = std::max(1, cfg.train.grad_accum);
    in.prefetch_layers = std::max(0, cfg.offload.prefetch_layers);
}

bool bf16_working_weights(const config::Config& cfg, bool host_device) {
    return !host_device && cfg.train.dtype == config::Precision::BF16;
}

MemoryPlanInputs memory_plan_inputs(const config::Config& cfg, const model::ParamLayout& layout,
                                    const std::vector<Bucket>& buckets, bool work_bf16) {
    MemoryPlanInputs in;
    in.num_params = layout.num_params;
    in.max_unit = max_unit_of(layout);
    for (int u = 0; u < layout.num_units(); u++)
        in.unit_numel.push_back(layout.unit_begin[static_cast<size_t>(u) + 1] -
                                layout.unit_begin[static_cast<size_t>(u)]);
    in.npieces = 0;
    for (const model::TensorInfo& t : layout.tensors)
        in.npieces += (t.numel + kernels::kStatPiece - 1) / kernels::kStatPiece;
    for (const Bucket& b : buckets) {
        in.bucket_numel.push_back(b.numel());
        in.bucket_place.push_back(b.place);
    }
    set_modes(in, cfg, work_bf16);
    return in;
}

MemoryPlan zero3_memory_plan(const Zero3Slots& z, MemSide side) {
    MemoryPlan p;
    const size_t N = static_cast<size_t>(z.shards);
    auto add = [&](Buf id, int index, MemKind kind, size_t bytes, std::string name) {
        if (bytes > 0) p.buffers.push_back({id, index, side, kind, bytes, std::move(name)});
    };
    auto slice_of = [&](int i) { return i == 0 ? z.slice : std::min(z.block_slice, z.slice); };
    const size_t ew = z.slots16 ? sizeof(uint16_t) : sizeof(float);
    for (int i = 0; i < kZeroGatherSlots; i++)
        add(Buf::ZeroGather, i, MemKind::Weights, N * slice_of(i) * ew,
            core::strfmt("ZeRO-3 gathered unit %d (%s%s)", i, z.slots16 ? "bf16" : "fp32",
                         i == 0 ? ", largest unit" : ""));
    add(Buf::ZeroRecv, 0, MemKind::Grads, N * z.slice * sizeof(float),
        "ZeRO-3 reduce-scatter receive buffer");
    for (int i = 0; i < kZeroGradSlots; i++) {
        add(Buf::ZeroGrads, i, MemKind::Grads, N * slice_of(i) * sizeof(float),
            core::strfmt("ZeRO-3 unit grads %d%s", i, i == 0 ? " (largest unit)" : ""));
        add(Buf::ZeroGradSlice, i, MemKind::Grads, slice_of(i) * sizeof(float),
            core::strfmt("ZeRO-3 reduced grad slice %d", i));
    }
    if (z.gather16 && !z.slots16) { // the lane runs one allgather at a time: one pair serves all
        add(Buf::ZeroSend16, 0, MemKind::Staging, z.slice * sizeof(uint16_t),
            "ZeRO-3 bf16 gather send buffer");
        add(Buf::ZeroRecv16, 0, MemKind::Staging, N * z.slice * sizeof(uint16_t),
            "ZeRO-3 bf16 gather receive buffer");
    }
    return p;
}

Zero3Slots zero3_slots(const MemoryPlanInputs& in, bool gather16, bool slots16) {
    Zero3Slots z;
    z.shards = in.shard_ranks;
    z.slice = in.zero3_slice;
    z.block_slice = in.zero3_block_slice;
    z.gather16 = gather16;
    z.slots16 = slots16;
    return z;
}

} // namespace sof::offload
