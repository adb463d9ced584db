// Bucket formation (see buckets.h): piece-aligned cuts in backward order, per-tensor slices.
#include "offload/buckets.h"

#include <algorithm>

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::offload {

namespace {

// The unit holding flat offset `off` (binary search over the unit starts).
int unit_of(const model::ParamLayout& layout, size_t off) {
    const auto first = layout.unit_begin.begin();
    const auto last = first + layout.num_units(); // starts of units 0..num_units-1
    const auto it = std::upper_bound(first + 1, last, off);
    return static_cast<int>(it - first) - 1;
}

} // namespace

// Linear in buckets + tensors (times a logarithm): each bucket finds its first tensor by binary
// search and walks only the tensors it overlaps, so a deep model plans fast.
std::vector<Bucket> make_buckets(const model::ParamLayout& layout,
                                 const std::vector<int64_t>& pieces, size_t bucket_elems,
                                 BucketWork* work) {
    SOF_CHECK(pieces.size() >= 2, "make_buckets: need at least one stat piece");
    if (bucket_elems == 0) bucket_elems = 1;
    const std::vector<model::TensorInfo>& ts = layout.tensors; // ascending offsets
    BucketWork w;
    std::vector<Bucket> out;
    int hi = static_cast<int>(pieces.size()) - 1; // piece index of the current bucket's end bound
    while (hi > 0) {
        int lo = hi - 1;
        w.pieces_walked++;
        while (lo > 0 && static_cast<size_t>(pieces[static_cast<size_t>(hi)] -
                                             pieces[static_cast<size_t>(lo)]) < bucket_elems) {
            lo--;
            w.pieces_walked++;
        }
        Bucket b;
        b.index = static_cast<int>(out.size());
        b.piece_begin = lo;
        b.piece_end = hi;
        b.begin = static_cast<size_t>(pieces[static_cast<size_t>(lo)]);
        b.end = static_cast<size_t>(pieces[static_cast<size_t>(hi)]);
        b.ready_unit = unit_of(layout, b.begin);
        // the first tensor ending after b.begin, then every tensor starting before b.end
        auto t = std::upper_bound(ts.begin(), ts.end(), b.begin,
                                  [&w](size_t off, const model::TensorInfo& x) {
                                      w.tensors_visited++;
                                      return off < x.offset + x.numel;
                                  });
        for (; t != ts.end() && t->offset < b.end; ++t) {
            w.tensors_visited++;
            size_t a = std::max(t->offset, b.begin), e = std::min(t->offset + t->numel, b.end);
            if (a < e) b.slices.push_back({a, e - a, t->decay});
        }
        out.push_back(std::move(b));
        hi = lo;
    }
    if (work) *work = w;
    return out;
}

void place_buckets(std::vector<Bucket>& buckets, int tail, int interleave_k) {
    int nb = static_cast<int>(buckets.size());
    int t = std::clamp(tail, 0, nb);
    for (Bucket& b : buckets) {
        b.place = Placement::Host;
        if (b.index >= nb - t)
            b.place = Placement::Device;
        else if (interleave_k >= 1 && (b.index + 1) % interleave_k == 0)
            b.place = Placement::Stream;
    }
}

std::string describe_buckets(const std::vector<Bucket>& buckets) {
    size_t biggest = 0;
    std::string res, str;
    int nres = 0, nstr = 0;
    for (const Bucket& b : buckets) {
        biggest = std::max(biggest, b.numel());
        if (b.place == Placement::Device) {
            res.append(nres++ ? "," : "").append(std::to_string(b.index));
        } else if (b.place == Placement::Stream) {
            str.append(nstr++ ? "," : "").append(std::to_string(b.index));
        }
    }
    std::string where;
    if (nres) where += " " + res + " (resident)";
    if (nstr) where += std::string(nres ? "," : "") + " " + str + " (streamed)";
    return core::strfmt("%zu buckets (largest %.2f MiB fp32), %d stepped on the device%s%s",
                        buckets.size(), 4.0 * static_cast<double>(biggest) / 1048576.0, nres + nstr,
                        nres + nstr ? ":" : "", where.c_str());
}

} // namespace sof::offload
