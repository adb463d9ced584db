// The SuperOffload engine's memory plan: every buffer the engine allocates (name, side, bytes),
// built by one function that the engine allocates from and that `superoffload plan` sums per rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/layout.h"
#include "offload/buckets.h"

namespace sof::offload {

// Where a buffer lives: device memory, page-locked host memory, ordinary (pageable) host memory
// (the engine's buffers are all device or pinned today; Host entries would be allocated pageable).
enum class MemSide { Device, Pinned, Host };

// What a buffer holds (for reports: weights, grads, optimizer state, everything else).
enum class MemKind { Weights, Grads, State, Staging };

// Identity of an engine buffer; `index` of BufferSpec tells state sets, buckets and slots apart.
enum class Buf {
    DevGrads,       // (num_params) fp32 grads the model adds into (pinned host in weight flow
                    // with accumulation)
    DevGradRing,    // (max unit) weight flow, no accumulation: grad ring slot `index` on the
                    // device, one unit's fp32 grads while backward and the bucket D2H need them
    DevWork,        // (num_params) working weights (stationary): fp32, or bf16 (work_bf16)
    DevStats,       // (npieces) grad statistics
    DevBounds,      // (npieces+1) int64 stat piece bounds, uploaded once (grad_prep reads them)
    DevStage32,     // (max host bucket) H2D staging fp32 (bf16, cast on the device)
    DevStage16,     // (max host bucket) H2D staging bf16
    DevGradStage16, // (max bucket) bf16 grads written by grad_prep (bf16, cast on the host)
    DevLowp,        // (max device/stream bucket) bf16 copy written by the device step (stationary)
    DevStateP,      // (bucket) fp32 master params of device-resident bucket `index`
    DevStateM,      // (bucket) exp_avg of device-resident bucket `index` (state dtype)
    DevStateV,      // (bucket) exp_avg_sq of device-resident bucket `index` (state dtype)
    SlotP,          // (max stream bucket) streaming slot `index`: fp32 params (interleaved)
    SlotM,          // (max stream bucket) streaming slot `index`: exp_avg (state dtype)
    SlotV,          // (max stream bucket) streaming slot `index`: exp_avg_sq (state dtype)
    FlowSlot32,     // (max unit) weight-flow slot `index`: fp32 weights the model reads
    FlowSlot16,     // (max unit) weight-flow slot `index`: bf16 (the model reads it: work_bf16)
    HostParams,     // (num_params) fp32 master params, state set `index`
    HostExpAvg,     // (num_params) exp_avg, state set `index` (state dtype: fp32 or bf16)
    HostExpAvgSq,   // (num_params) exp_avg_sq, state set `index` (state dtype)
    HostGrads,      // (num_params) fp32 grads offloaded D2H (stationary)
    HostGrads16,    // (num_params) bf16 grads offloaded D2H (stationary, bf16, cast on the host)
    HostStats,      // (npieces) grad statistics
    HostPub16,      // (max host bucket) stationary, cast host: bf16 params of a host step on
                    // their way H2D, ring slot `index` (0, 1)
    HostNaN,        // (1) NaN for the debug injection
    // the ZeRO-3 wrapper's (lib/zero) buffers, whole units of the full model: zero3_memory_plan
    // (slot `index` 0: N x the largest slice; the others: N x the largest block slice)
    ZeroGather,    // (slot) all-gathered unit, gather slot `index` (fp32, or bf16: slots16)
    ZeroRecv,      // (N x largest slice) fp32 reduce-scatter receive buffer (one: the lane runs
                   // one collective at a time)
    ZeroGrads,     // (slot) fp32: a unit's full grads the model adds into, grad slot `index`
    ZeroGradSlice, // (slot / N) this rank's reduced slice of grad slot `index`
    ZeroSend16,    // (largest slice) bf16 gathers into fp32 slots: this rank's slice as bf16
    ZeroRecv16,    // (N x largest slice) bf16 gathers into fp32 slots: the gathered bf16 unit,
                   // widened into a gather slot
};

struct BufferSpec {
    Buf id = Buf::DevGrads;
    int index = 0; // state set, bucket index or slot index (see Buf)
    MemSide side = MemSide::Device;
    MemKind kind = MemKind::Staging;
    size_t bytes = 0; // as requested; allocators round up to kMemAlign
    std::string name; // for allocation errors and reports
};

// Allocation granularity of both device allocators and of pinned host memory.
constexpr size_t kMemAlign = 256;
inline size_t mem_round(size_t bytes) {
    return (bytes + kMemAlign - 1) / kMemAlign * kMemAlign;
}

// What the plan depends on: sizes of this rank's parameter shard and the deck's engine modes.
struct MemoryPlanInputs {
    size_t num_params = 0; // parameters of the engine's layout (this rank's shard under ZeRO-3)
    size_t max_unit = 0;   // largest unit of that layout (weight-flow slot size)
    std::vector<size_t> unit_numel;      // (num_units) elements of each unit of that layout
    int grad_accum = 1;                  // micro-batches per step (train.grad_accum)
    size_t npieces = 1;                  // grad statistic pieces of the shard
    std::vector<size_t> bucket_numel;    // (nbuckets) elements of each bucket, backward order
    std::vector<Placement> bucket_place; // (nbuckets) where each bucket's state lives and steps
    bool bf16 = false;                   // working precision bf16
    bool flow = false;                   // weight flow (else stationary)
    bool cast_host = false;              // bf16 cast on the host
    bool exact = true;                   // exact rollback: two host state sets (when speculating)
    bool speculate = true;               // STV may step speculatively (not synchronous, stv on)
    bool state_bf16 = false;             // optimizer.state_dtype bf16: m, v of 2 bytes
    bool ring_ok = true;                 // offload.flow_grads not host: a grad ring may be used
    bool work_bf16 = false; // the model reads bf16 working weights (CUDA, train.dtype bf16)
    int prefetch_layers = 1;
    int shard_ranks = 1;    // ZeRO-3 ranks the state is sharded over (sizes above are per rank)
    size_t zero3_slice = 0; // ZeRO-3: largest unit slice of the shard (0 without ZeRO-3)
    size_t zero3_block_slice = 0; // ZeRO-3: largest slice of the blocks (units 1..L)
};

struct MemoryPlan {
    std::vector<BufferSpec> buffers; // in allocation order; no zero-sized entries
    // Bytes on `side`, each buffer rounded up to kMemAlign (what the allocators account).
    size_t total(MemSide side) const;
    size_t total(MemSide side, MemKind kind) const;
};

// The buffers of the engine for `in` (the one place that decides what the engine allocates).
MemoryPlan make_memory_plan(const MemoryPlanInputs& in);

// The ZeRO-3 wrapper (lib/zero) gathers whole units into kZeroGatherSlots slots and collects
// whole-unit grads in kZeroGradSlots slots. Slot 0 of each holds N x the largest unit slice (the
// embedding / LM head of a large vocabulary: 2.3x a 13B Llama block), the others N x the largest
// block slice, and a unit takes the smallest free slot it fits (the least recently used among
// equals). So the blocks alternate in slots 1 and 2 (current + prefetched; current + one
// reduce-scatter in flight), a tied embedding held all pass sits in slot 0, and an untied
// model's embedding (start of the forward, end of the backward) and LM head (end of the forward,
// start of the backward), never needed at once, take slot 0 in turn.
constexpr int kZeroGatherSlots = 3;
constexpr int kZeroGradSlots = 3;

// What the wrapper's buffers depend on.
struct Zero3Slots {
    int shards = 1;         // N
    size_t slice = 0;       // largest unit slice (elements): slot 0 and the receive buffer
    size_t block_slice = 0; // largest slice of the blocks (units 1..L): slots 1.. (<= slice)
    bool gather16 = false;  // fp32 slots, train.dtype bf16: the gather moves bf16 through one
                            // send and one receive buffer (exact: the weights are bf16 values)
    bool slots16 = false;   // the model reads bf16 weights (bf16_working_weights): bf16 gather
                            // slots, gathered straight from the engine's bf16 working weights
};

// The wrapper's buffers on `side` (it allocates them in device memory: the model reads and
// writes them there). The one place that decides what the wrapper allocates; the planner adds it
// to the engine's. Slot i's capacity: bytes / N / element size.
MemoryPlan zero3_memory_plan(const Zero3Slots& z, MemSide side);
// Zero3Slots of a rank's plan inputs (zero3_slice, zero3_block_slice, shard_ranks).
Zero3Slots zero3_slots(const MemoryPlanInputs& in, bool gather16, bool slots16);

// Slots of the weight-flow grad ring for `in` (0: no ring, the model's fp32 grads are one
// whole-model pinned buffer). A ring is used with weight flow, no accumulation (grad_accum 1), no
// streamed buckets and offload.flow_grads not host, when it is smaller than the model: slot 0 holds
// unit 0 for the whole backward (a tied LM head adds into it first), the others hold the unit being
// written and every unit a bucket still needs (a bucket launches when the unit of its first element
// is done; device-stepped buckets keep their units until the step ends).
int grad_ring_slots(const MemoryPlanInputs& in);

// Streaming slots of the interleaved schedule for `nstream` streamed buckets: double-buffered
// (one updating on the device while the next is prefetched), at most nstream.
int stream_slot_count(int nstream);

// The engine's buckets for a deck over `layout` (make_buckets of offload.bucket_mb, then
// place_buckets with gpu_tail_buckets and, for schedule interleaved, interleave_k).
std::vector<Bucket> engine_buckets(const config::Config& cfg, const model::ParamLayout& layout,
                                   const std::vector<int64_t>& pieces);

// Whether the model reads bf16 weights, so that the engine keeps bf16 working weights
// (MemoryPlanInputs::work_bf16) and the ZeRO-3 wrapper bf16 gather slots (Zero3Slots::slots16):
// on a CUDA device (host_device false) with train.dtype bf16 (the CUDA driver's bf16
// activations). The CPU twins read fp32 (bf16 values held in fp32 in bf16 runs).
bool bf16_working_weights(const config::Config& cfg, bool host_device);

// Inputs of the engine on `layout` (one rank, its own shard) with `buckets` (engine_buckets).
MemoryPlanInputs memory_plan_inputs(const config::Config& cfg, const model::ParamLayout& layout,
                                    const std::vector<Bucket>& buckets, bool work_bf16);

} // namespace sof::offload
