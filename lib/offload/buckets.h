// Bucket formation for the SuperOffload engine: the flat parameter space cut into buckets of about
// offload.bucket_mb in backward order, each split into per-tensor slices (weight decay per tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/layout.h"

namespace sof::offload {

// Part of one tensor inside one bucket.
struct BucketSlice {
    size_t offset = 0; // flat element offset
    size_t n = 0;      // elements
    bool decay = false;
};

// Where a bucket's fp32 master, m, v live and where it steps: Host (pinned host memory, CPU step),
// Device (resident on the device, device step), Stream (pinned host memory, streamed to a device
// slot for a device step and back: Deep Optimizer States' GPU-scheduled subgroups).
enum class Placement { Host, Device, Stream };

struct Bucket {
    int index = 0;    // position in backward order (0 = the highest offsets, done first)
    size_t begin = 0; // flat range [begin, end)
    size_t end = 0;
    int piece_begin = 0; // stat pieces [piece_begin, piece_end) (indices into stat_pieces())
    int piece_end = 0;
    int ready_unit = 0; // grads complete at GradSink::unit_done(ready_unit) (unit of `begin`)
    Placement place = Placement::Host;
    std::vector<BucketSlice> slices; // ascending offsets
    size_t numel() const { return end - begin; }
};

// The work make_buckets did, counted where it is done (tests assert it stays linear in buckets +
// pieces + tensors: a deep model must plan fast on any machine).
struct BucketWork {
    size_t pieces_walked = 0;   // piece bounds stepped over while cutting
    size_t tensors_visited = 0; // tensor records looked at while slicing (binary-search probes
                                // included)
};

// Cuts `pieces` (stat piece bounds, see common.h) into buckets of at least `bucket_elems`
// elements (one piece at least; the last bucket of the walk takes what is left), walking from
// the end of the flat buffer (backward order). Returned in backward order. `work`, when given,
// receives the counts of BucketWork.
std::vector<Bucket> make_buckets(const model::ParamLayout& layout,
                                 const std::vector<int64_t>& pieces, size_t bucket_elems,
                                 BucketWork* work = nullptr);

// Marks device-resident buckets (the last `tail` in backward order: DOS's static GPU residents)
// and, with interleave_k >= 1, streamed buckets: every k-th of the others ((index + 1) % k == 0,
// Deep Optimizer States Algorithm 1 line 4).
void place_buckets(std::vector<Bucket>& buckets, int tail, int interleave_k);

// "12 buckets (largest 64.00 MiB fp32), 2 stepped on the device: 10,11 (resident), 1,3 (streamed)"
std::string describe_buckets(const std::vector<Bucket>& buckets);

} // namespace sof::offload
