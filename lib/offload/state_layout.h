// The optimizer state's formats (optimizer.master_dtype, state_dtype, state_block) and where each
// element's state lives in the update paths' flat buffers: bytes per master param and per moment,
// and the Q8 blocks (per tensor, from its first element), for the engine, the plain path, the
// memory plan and checkpoints alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/layout.h"
#include "optim/sof_optim_abi.h"

namespace sof::offload {

// The state formats of a run (every `auto` resolved; unresolved auto = fp32).
struct StateFormat {
    sof_dtype master = SOF_DTYPE_F32;         // master params: fp32, or bf16 (stochastic rounding)
    sof_state_format moments = SOF_STATE_F32; // m, v: fp32, bf16 or q8
    int block = 0;                            // q8: elements per scale (a power of two, 64..4096)
    bool operator==(const StateFormat& o) const {
        return master == o.master && moments == o.moments && block == o.block;
    }
    bool operator!=(const StateFormat& o) const { return !(*this == o); }
    bool native() const { return master != SOF_DTYPE_F32 || moments == SOF_STATE_Q8; }
    std::string name() const; // "fp32 master, q8 moments (block 256)"
};

// The deck's names of a format ("fp32", "bf16", "q8") and of a master dtype ("fp32", "bf16").
const char* moments_deck_name(sof_state_format f);
const char* master_deck_name(sof_dtype d);
config::StateDtype state_dtype_of(sof_state_format f);
config::MasterDtype master_dtype_of(sof_dtype d);

// The deck's formats; throws core::Error (Config) naming optimizer.state_block when it is not a
// power of two in [64, 4096] with q8 moments.
StateFormat state_format(const config::OptimizerConfig& oc);

// Bytes of one master param / one moment element (Q8: the code; its block's scale comes on top).
inline size_t master_elem_bytes(const StateFormat& f) {
    return f.master == SOF_DTYPE_F32 ? 4 : 2;
}
inline size_t moment_elem_bytes(const StateFormat& f) {
    return f.moments == SOF_STATE_F32 ? 4 : (f.moments == SOF_STATE_BF16 ? 2 : 1);
}

// Bytes of one state slot buffer of n elements in `blocks` Q8 blocks: the values (fp32/bf16) or
// the codes, then (Q8) the scales at slot_scale_offset(n) (codes padded to 64 bytes).
size_t slot_scale_offset(size_t n);
size_t slot_bytes(const StateFormat& f, size_t n, size_t blocks);

// Q8 blocks of a flat layout: every tensor's elements in blocks of `block` from its first
// element (its last block may be short), numbered in flat order. Every bucket slice starts at a
// block boundary: slices begin at a tensor start or kStatPiece elements into it, a multiple of
// every block size.
class StateBlocks {
  public:
    StateBlocks() = default;
    StateBlocks(const model::ParamLayout& layout, int block);
    int block() const { return block_; }
    size_t count() const { return first_.empty() ? 0 : first_.back(); }
    // The block holding flat offset off (its tensor found by binary search).
    size_t block_of(size_t off) const;
    // Blocks overlapping the flat range [begin, end) (a bucket): [block_of(begin), that + count).
    size_t count_in(size_t begin, size_t end) const;
    // fn(first element, length, block index) for every block of the layout's n elements.
    template <class Fn> void each(size_t n, Fn&& fn) const {
        const size_t B = static_cast<size_t>(block_);
        for (size_t t = 0; t < begin_.size(); t++) {
            const size_t te = t + 1 < begin_.size() ? begin_[t + 1] : n;
            size_t b = first_[t];
            for (size_t i = begin_[t]; i < te; i += B, b++)
                fn(i, te - i < B ? te - i : B, b);
        }
    }

  private:
    int block_ = 0;
    std::vector<size_t> begin_; // (tensors) first flat offset of each tensor
    std::vector<size_t> first_; // (tensors + 1) first block of each tensor
};

// A whole-layout copy of the state in its formats (the checkpoint form of native formats, and
// what get_state / set_state convert): master (n elements of the master dtype) and per moment
// one slot buffer (slot_bytes of the layout).
struct NativeState {
    StateFormat format;
    std::vector<uint8_t> params;  // (n) master params, raw
    std::vector<uint8_t> slot[2]; // exp_avg, exp_avg_sq: values or codes + scales
    int64_t opt_step = 0;
};

// Converts between a native state and fp32 arrays (n each): bf16 widens exactly and rounds to
// nearest even; Q8 decodes and quantizes block by block (optim/qstate.h). `ns` must be sized
// (resize_native) before f32_to_native.
void resize_native(NativeState* ns, const StateBlocks& blocks, size_t n);
// Throws core::Error (Format) when ns's buffers are not the sizes of its format over n elements
// (a checkpoint file of another layout).
void check_native_sizes(const NativeState& ns, const StateBlocks& blocks, size_t n);
void native_to_f32(const NativeState& ns, const StateBlocks& blocks, size_t n, float* params,
                   float* exp_avg, float* exp_avg_sq);
void f32_to_native(const float* params, const float* exp_avg, const float* exp_avg_sq,
                   const StateBlocks& blocks, size_t n, NativeState* ns);

} // namespace sof::offload
