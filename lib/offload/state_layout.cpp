// The optimizer state's formats and layout (see state_layout.h): the deck's formats, Q8 blocks per
// tensor, slot buffer sizes and the conversions between native and fp32 state.
#include "offload/state_layout.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "kernels/grad_stats.h"
#include "optim/qstate.h"

namespace sof::offload {

std::string StateFormat::name() const {
    std::string s = master == SOF_DTYPE_F32 ? "fp32 master, " : "bf16 master (stochastic), ";
    if (moments == SOF_STATE_Q8) return s + core::strfmt("q8 moments (block %d)", block);
    return s + (moments == SOF_STATE_BF16 ? "bf16 moments" : "fp32 moments");
}

const char* moments_deck_name(sof_state_format f) {
    return f == SOF_STATE_Q8 ? "q8" : (f == SOF_STATE_BF16 ? "bf16" : "fp32");
}
const char* master_deck_name(sof_dtype d) {
    return d == SOF_DTYPE_BF16 ? "bf16" : "fp32";
}
config::StateDtype state_dtype_of(sof_state_format f) {
    return f == SOF_STATE_Q8
               ? config::StateDtype::Q8
               : (f == SOF_STATE_BF16 ? config::StateDtype::BF16 : config::StateDtype::FP32);
}
config::MasterDtype master_dtype_of(sof_dtype d) {
    return d == SOF_DTYPE_BF16 ? config::MasterDtype::BF16 : config::MasterDtype::FP32;
}

StateFormat state_format(const config::OptimizerConfig& oc) {
    StateFormat f;
    f.master = oc.master_dtype == config::MasterDtype::BF16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
    switch (oc.state_dtype) {
    case config::StateDtype::BF16:
        f.moments = SOF_STATE_BF16;
        break;
    case config::StateDtype::Q8:
        f.moments = SOF_STATE_Q8;
        break;
    default:
        f.moments = SOF_STATE_F32;
        break;
    }
    if (f.moments == SOF_STATE_Q8) {
        const int b = oc.state_block;
        if (b < 64 || b > optim::kQBlockMax || (b & (b - 1)) != 0)
            SOF_FAIL(Config,
                     "optimizer.state_block = %d: q8 moments need a power of two from 64 to %d "
                     "elements per scale (256 is the usual choice)",
                     b, optim::kQBlockMax);
        f.block = b;
    }
    static_assert(kernels::kStatPiece % optim::kQBlockMax == 0, "bucket cuts on block bounds");
    return f;
}

size_t slot_scale_offset(size_t n) {
    return (n + 63) / 64 * 64;
}

size_t slot_bytes(const StateFormat& f, size_t n, size_t blocks) {
    if (f.moments != SOF_STATE_Q8) return n * moment_elem_bytes(f);
    return slot_scale_offset(n) + 4 * blocks;
}

StateBlocks::StateBlocks(const model::ParamLayout& layout, int block) : block_(block) {
    if (block <= 0) return;
    first_.push_back(0);
    for (const model::TensorInfo& t : layout.tensors) {
        begin_.push_back(t.offset);
        first_.push_back(first_.back() + (t.numel + block - 1) / block);
    }
}

size_t StateBlocks::block_of(size_t off) const {
    if (begin_.empty()) return 0;
    size_t t =
        static_cast<size_t>(std::upper_bound(begin_.begin(), begin_.end(), off) - begin_.begin());
    t = t > 0 ? t - 1 : 0;
    return first_[t] + (off - begin_[t]) / static_cast<size_t>(block_);
}

size_t StateBlocks::count_in(size_t begin, size_t end) const {
    if (begin_.empty() || end <= begin) return 0;
    return block_of(end - 1) + 1 - block_of(begin);
}

void resize_native(NativeState* ns, const StateBlocks& blocks, size_t n) {
    ns->params.assign(n * master_elem_bytes(ns->format), 0);
    for (auto& s : ns->slot)
        s.assign(slot_bytes(ns->format, n, blocks.count()), 0);
}

void check_native_sizes(const NativeState& ns, const StateBlocks& blocks, size_t n) {
    const size_t pb = n * master_elem_bytes(ns.format);
    const size_t sb = slot_bytes(ns.format, n, blocks.count());
    if (ns.params.size() != pb || ns.slot[0].size() != sb || ns.slot[1].size() != sb)
        SOF_FAIL(Format,
                 "optimizer state of %s over %zu params needs %zu + 2 x %zu bytes, got %zu, %zu, "
                 "%zu (a checkpoint of another model or layout)",
                 ns.format.name().c_str(), n, pb, sb, ns.params.size(), ns.slot[0].size(),
                 ns.slot[1].size());
}

void native_to_f32(const NativeState& ns, const StateBlocks& blocks, size_t n, float* params,
                   float* exp_avg, float* exp_avg_sq) {
    const StateFormat& f = ns.format;
    if (f.master == SOF_DTYPE_F32) {
        std::memcpy(params, ns.params.data(), n * 4);
    } else {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(ns.params.data());
        for (size_t i = 0; i < n; i++)
            params[i] = core::bf16_to_f32(h[i]);
    }
    float* out[2] = {exp_avg, exp_avg_sq};
    for (int k = 0; k < 2; k++) {
        const uint8_t* s = ns.slot[k].data();
        if (f.moments == SOF_STATE_F32) {
            std::memcpy(out[k], s, n * 4);
        } else if (f.moments == SOF_STATE_BF16) {
            const uint16_t* h = reinterpret_cast<const uint16_t*>(s);
            for (size_t i = 0; i < n; i++)
                out[k][i] = core::bf16_to_f32(h[i]);
        } else {
            const float* sc = reinterpret_cast<const float*>(s + slot_scale_offset(n));
            const optim::QMap q = optim::q8_map(k == 0);
            blocks.each(n, [&](size_t i0, size_t len, size_t b) {
                for (size_t j = 0; j < len; j++)
                    out[k][i0 + j] = optim::q_value(s[i0 + j], sc[b], q);
            });
        }
    }
}

void f32_to_native(const float* params, const float* exp_avg, const float* exp_avg_sq,
                   const StateBlocks& blocks, size_t n, NativeState* ns) {
    const StateFormat& f = ns->format;
    if (f.master == SOF_DTYPE_F32) {
        std::memcpy(ns->params.data(), params, n * 4);
    } else { // round to nearest even: a conversion, not a step (no stochastic rounding)
        uint16_t* h = reinterpret_cast<uint16_t*>(ns->params.data());
        for (size_t i = 0; i < n; i++)
            h[i] = core::f32_to_bf16(params[i]);
    }
    const float* in[2] = {exp_avg, exp_avg_sq};
    for (int k = 0; k < 2; k++) {
        uint8_t* s = ns->slot[k].data();
        if (f.moments == SOF_STATE_F32) {
            std::memcpy(s, in[k], n * 4);
        } else if (f.moments == SOF_STATE_BF16) {
            uint16_t* h = reinterpret_cast<uint16_t*>(s);
            for (size_t i = 0; i < n; i++)
                h[i] = core::f32_to_bf16(in[k][i]);
        } else {
            float* sc = reinterpret_cast<float*>(s + slot_scale_offset(n));
            const optim::QMap q = optim::q8_map(k == 0);
            blocks.each(n, [&](size_t i0, size_t len, size_t b) {
                optim::q_quantize_block(in[k] + i0, static_cast<int64_t>(len), q, s + i0, &sc[b]);
            });
        }
    }
}

} // namespace sof::offload
