// sof_optim_check.h: the argument checks of the optimizer plugin ABI, one copy for every plugin
// (cpu_adam, grace_adam, gpu_adam) through the shared shell. Header-only; includes nothing of ours
// but sof_optim_abi.h.
#ifndef SOF_OPTIM_CHECK_H
#define SOF_OPTIM_CHECK_H

#include <cstdint>
#include <string>

#include "optim/qstate.h"
#include "optim/sof_optim_abi.h"

namespace sof::optim {

// A grad dtype the ABI defines (fp32, bf16, fp16).
inline bool valid_grad_dtype(int32_t t) {
    return t == SOF_DTYPE_F32 || t == SOF_DTYPE_BF16 || t == SOF_DTYPE_F16;
}

// Bytes of one element of dtype t (fp32 4, bf16/fp16 2).
inline int64_t dtype_bytes(int32_t t) {
    return t == SOF_DTYPE_F32 ? 4 : 2;
}

// Bytes of one element of a state slot of format f (F32 4, BF16 2, Q8 1 code).
inline int64_t state_elem_bytes(int32_t f) {
    return f == SOF_STATE_F32 ? 4 : (f == SOF_STATE_BF16 ? 2 : 1);
}

inline bool state_quantized(int32_t f) {
    return f == SOF_STATE_Q8;
}

// Scales of n elements in blocks of `block` (quantized slots).
inline int64_t state_blocks(int64_t n, int32_t block) {
    return block > 0 ? (n + block - 1) / block : 0;
}

inline const char* state_format_name(int32_t f) {
    switch (f) {
    case SOF_STATE_F32:
        return "f32";
    case SOF_STATE_BF16:
        return "bf16";
    case SOF_STATE_Q8:
        return "q8";
    }
    return "unknown";
}

// In place (a == b) or disjoint over `bytes`; a partial overlap is not allowed.
inline bool same_or_disjoint(const void* a, const void* b, int64_t bytes) {
    uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x == y || x + static_cast<uintptr_t>(bytes) <= y ||
           y + static_cast<uintptr_t>(bytes) <= x;
}

// Checks slice `index` of a step call and its hparams against plugin table `pl` (its slot count,
// state formats and master dtypes): struct sizes, n, dtypes, formats and blocks, null buffers,
// outputs either the inputs or disjoint from them, mode, betas in [0, 1), step >= 1 with bias
// correction. SOF_OK, or SOF_ERR_INVALID_ARGUMENT / SOF_ERR_UNSUPPORTED (a format or master
// dtype the plugin does not step) with *why = "slice <index>: <what>".
inline sof_status check_slice(const sof_optim_plugin& pl, const sof_optim_slice* s,
                              const sof_optim_hparams* hp, int index, std::string* why) {
    const std::string at = "slice " + std::to_string(index) + ": ";
    auto bad = [&](const std::string& what) {
        *why = at + what;
        return SOF_ERR_INVALID_ARGUMENT;
    };
    if (!s || !hp) return bad("null slice or hparams");
    if (s->struct_size < sizeof(sof_optim_slice) || hp->struct_size < sizeof(sof_optim_hparams))
        return bad("struct_size too small (slice " + std::to_string(s->struct_size) + " < " +
                   std::to_string(sizeof(sof_optim_slice)) + ", hparams " +
                   std::to_string(hp->struct_size) + " < " +
                   std::to_string(sizeof(sof_optim_hparams)) + ")");
    if (s->n < 0) return bad("negative n (" + std::to_string(s->n) + ")");
    if (!valid_grad_dtype(s->grad_dtype))
        return bad("grad_dtype " + std::to_string(s->grad_dtype) + " is not f32/bf16/f16");
    if (s->param_dtype != SOF_DTYPE_F32 && s->param_dtype != SOF_DTYPE_BF16)
        return bad("param_dtype " + std::to_string(s->param_dtype) + " is not f32/bf16");
    if (!(pl.param_dtypes & (1u << s->param_dtype))) {
        *why = at + "param_dtype " + (s->param_dtype == SOF_DTYPE_BF16 ? "bf16" : "f32") +
               " (master params) is not supported by " + pl.name;
        return SOF_ERR_UNSUPPORTED;
    }
    if (s->lowp_out && s->lowp_dtype != SOF_DTYPE_BF16 && s->lowp_dtype != SOF_DTYPE_F16)
        return bad("lowp_dtype " + std::to_string(s->lowp_dtype) + " is not bf16/f16");
    if (s->num_slots != pl.num_slots)
        return bad("num_slots " + std::to_string(s->num_slots) + ", but " + pl.algorithm +
                   " keeps " + std::to_string(pl.num_slots));
    int32_t qblock = 0;
    for (int k = 0; k < s->num_slots; k++) {
        const sof_state_slot& q = s->slot[k];
        const std::string sn =
            std::string("slot ") + std::to_string(k) + " (" + pl.slots[k].name + ")";
        if (q.format != SOF_STATE_F32 && q.format != SOF_STATE_BF16 && q.format != SOF_STATE_Q8)
            return bad(sn + ": state format " + std::to_string(q.format) + " is not f32/bf16/q8");
        if (!(pl.state_formats & (1u << q.format))) {
            *why = at + sn + ": state format " + state_format_name(q.format) +
                   " is not supported by " + pl.name;
            return SOF_ERR_UNSUPPORTED;
        }
        if (q.format != s->slot[0].format) {
            *why = at + sn + ": state format " + state_format_name(q.format) + " differs from " +
                   "slot 0's " + state_format_name(s->slot[0].format) +
                   " (the slots of one slice share a format)";
            return SOF_ERR_UNSUPPORTED;
        }
        if (state_quantized(q.format)) {
            // a power of two: cpu_adam's 8192-element tiles hold whole blocks
            if (q.block < kQBlockMin || q.block > kQBlockMax || (q.block & (q.block - 1)) != 0)
                return bad(sn + ": block " + std::to_string(q.block) +
                           " must be a power of two from " + std::to_string(kQBlockMin) + " to " +
                           std::to_string(kQBlockMax));
            if (qblock != 0 && q.block != qblock)
                return bad(sn + ": block " + std::to_string(q.block) +
                           " differs from another quantized slot's " + std::to_string(qblock));
            qblock = q.block;
        } else if (q.block != 0) {
            return bad(sn + ": block must be 0 for a " + state_format_name(q.format) + " slot");
        }
    }
    if (hp->mode != SOF_ADAM_ADAMW && hp->mode != SOF_ADAM_L2)
        return bad("mode " + std::to_string(hp->mode) + " is not ADAMW or L2");
    if (!(hp->beta1 >= 0.0f && hp->beta1 < 1.0f && hp->beta2 >= 0.0f && hp->beta2 < 1.0f))
        return bad("betas must lie in [0, 1)");
    if (hp->bias_correction && hp->step < 1)
        return bad("step " + std::to_string(hp->step) + " < 1 with bias correction (1-based)");
    if (s->n == 0) return SOF_OK;
    if (!s->param || !s->grad || !s->param_out) return bad("null buffer pointer");
    if (!same_or_disjoint(s->param, s->param_out, s->n * dtype_bytes(s->param_dtype)))
        return bad("outputs partially overlap inputs (must be the same buffer or disjoint)");
    for (int k = 0; k < s->num_slots; k++) {
        const sof_state_slot& q = s->slot[k];
        const bool quant = state_quantized(q.format);
        if (!q.data || !q.data_out || (quant && (!q.scale || !q.scale_out)))
            return bad("null buffer pointer");
        const int64_t bytes = s->n * state_elem_bytes(q.format);
        if (!same_or_disjoint(q.data, q.data_out, bytes) ||
            (quant && !same_or_disjoint(q.scale, q.scale_out, 4 * state_blocks(s->n, q.block))))
            return bad("outputs partially overlap inputs (must be the same buffer or disjoint)");
        if (quant && (q.data == q.data_out) != (q.scale == q.scale_out))
            return bad("slot " + std::to_string(k) +
                       ": codes and scales must both be in place or both separate");
    }
    return SOF_OK;
}

// The checks of rollback on top of check_slice: the slice is in place (SOF_ERR_INVALID_ARGUMENT
// otherwise), its params fp32 and its slots fp32/bf16, and the step is invertible: beta1, beta2
// != 0 and, for AdamW with decay, lr*weight_decay != 1 (SOF_ERR_UNSUPPORTED otherwise).
inline sof_status check_rollback(const sof_optim_plugin& pl, const sof_optim_slice* s,
                                 const sof_optim_hparams* hp, std::string* why) {
    if (sof_status st = check_slice(pl, s, hp, 0, why); st != SOF_OK) return st;
    bool in_place = s->param_out == s->param;
    for (int k = 0; k < s->num_slots; k++)
        in_place = in_place && s->slot[k].data_out == s->slot[k].data;
    if (!in_place) {
        *why = "rollback inverts an in-place step: param_out and every slot's data_out must equal "
               "param and data (separate-output steps need no rollback)";
        return SOF_ERR_INVALID_ARGUMENT;
    }
    if (s->param_dtype != SOF_DTYPE_F32) {
        *why = "rollback: bf16 master params are stochastically rounded, not invertible: roll "
               "back exactly instead (separate outputs, offload.rollback: exact)";
        return SOF_ERR_UNSUPPORTED;
    }
    for (int k = 0; k < s->num_slots; k++)
        if (state_quantized(s->slot[k].format)) {
            *why = std::string("rollback: slot ") + pl.slots[k].name + " is quantized (" +
                   state_format_name(s->slot[k].format) +
                   "), not invertible: roll back exactly instead (separate outputs, "
                   "offload.rollback: exact)";
            return SOF_ERR_UNSUPPORTED;
        }
    if (hp->beta1 == 0.0f || hp->beta2 == 0.0f) {
        *why = "rollback: beta1 or beta2 is 0 (not invertible)";
        return SOF_ERR_UNSUPPORTED;
    }
    if (hp->mode == SOF_ADAM_ADAMW && hp->weight_decay != 0.0f &&
        static_cast<float>(1.0 - static_cast<double>(hp->lr) * hp->weight_decay) == 0.0f) {
        *why = "rollback: lr*weight_decay == 1 (not invertible)";
        return SOF_ERR_UNSUPPORTED;
    }
    return SOF_OK;
}

// Checks the arguments of grad_stats.
inline sof_status check_grad_stats(const void* grad, int32_t grad_dtype, int64_t n,
                                   const sof_optim_result* result, std::string* why) {
    if (n < 0 || (n > 0 && !grad) || !result || !valid_grad_dtype(grad_dtype)) {
        *why = "grad_stats: null grad or result, negative n, or grad_dtype not f32/bf16/f16";
        return SOF_ERR_INVALID_ARGUMENT;
    }
    return SOF_OK;
}

} // namespace sof::optim

#endif // SOF_OPTIM_CHECK_H
