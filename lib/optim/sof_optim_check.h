// sof_optim_check.h: the argument checks of the optimizer plugin ABI, one copy for every plugin
// (cpu_adam, grace_adam, gpu_adam). Header-only; includes nothing of ours but sof_optim_abi.h.
#ifndef SOF_OPTIM_CHECK_H
#define SOF_OPTIM_CHECK_H

#include <cstdint>
#include <string>

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

// In place (a == b) or disjoint over `bytes`; a partial overlap is not allowed.
inline bool same_or_disjoint(const void* a, const void* b, int64_t bytes) {
    uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x == y || x + static_cast<uintptr_t>(bytes) <= y ||
           y + static_cast<uintptr_t>(bytes) <= x;
}

// Checks slice `index` of a step call and its hparams: struct sizes, n, dtypes, null buffers,
// outputs either the inputs or disjoint from them, mode, betas in [0, 1), step >= 1 with bias
// correction. SOF_OK, or SOF_ERR_INVALID_ARGUMENT with *why = "slice <index>: <what>".
inline sof_status check_adam_slice(const sof_adam_slice* s, const sof_adam_hparams* hp, int index,
                                   std::string* why) {
    const std::string at = "slice " + std::to_string(index) + ": ";
    auto bad = [&](const std::string& what) {
        *why = at + what;
        return SOF_ERR_INVALID_ARGUMENT;
    };
    if (!s || !hp) return bad("null slice or hparams");
    if (s->struct_size < sizeof(sof_adam_slice) || hp->struct_size < sizeof(sof_adam_hparams))
        return bad("struct_size too small (slice " + std::to_string(s->struct_size) + " < " +
                   std::to_string(sizeof(sof_adam_slice)) + ", hparams " +
                   std::to_string(hp->struct_size) + " < " +
                   std::to_string(sizeof(sof_adam_hparams)) + ")");
    if (s->n < 0) return bad("negative n (" + std::to_string(s->n) + ")");
    if (!valid_grad_dtype(s->grad_dtype))
        return bad("grad_dtype " + std::to_string(s->grad_dtype) + " is not f32/bf16/f16");
    if (s->state_dtype != SOF_DTYPE_F32 && s->state_dtype != SOF_DTYPE_BF16)
        return bad("state_dtype " + std::to_string(s->state_dtype) + " is not f32/bf16");
    if (s->lowp_out && s->lowp_dtype != SOF_DTYPE_BF16 && s->lowp_dtype != SOF_DTYPE_F16)
        return bad("lowp_dtype " + std::to_string(s->lowp_dtype) + " is not bf16/f16");
    if (hp->mode != SOF_ADAM_ADAMW && hp->mode != SOF_ADAM_L2)
        return bad("mode " + std::to_string(hp->mode) + " is not ADAMW or L2");
    if (!(hp->beta1 >= 0.0f && hp->beta1 < 1.0f && hp->beta2 >= 0.0f && hp->beta2 < 1.0f))
        return bad("betas must lie in [0, 1)");
    if (hp->bias_correction && hp->step < 1)
        return bad("step " + std::to_string(hp->step) + " < 1 with bias correction (1-based)");
    if (s->n == 0) return SOF_OK;
    if (!s->param || !s->grad || !s->exp_avg || !s->exp_avg_sq || !s->param_out ||
        !s->exp_avg_out || !s->exp_avg_sq_out)
        return bad("null buffer pointer");
    const int64_t pb = s->n * 4, sb = s->n * dtype_bytes(s->state_dtype);
    if (!same_or_disjoint(s->param, s->param_out, pb) ||
        !same_or_disjoint(s->exp_avg, s->exp_avg_out, sb) ||
        !same_or_disjoint(s->exp_avg_sq, s->exp_avg_sq_out, sb))
        return bad("outputs partially overlap inputs (must be the same buffer or disjoint)");
    return SOF_OK;
}

// The checks of adam_rollback on top of check_adam_slice: the slice is in place
// (SOF_ERR_INVALID_ARGUMENT otherwise) and the step is invertible: beta1, beta2 != 0 and, for
// AdamW with decay, lr*weight_decay != 1 (SOF_ERR_UNSUPPORTED otherwise).
inline sof_status check_adam_rollback(const sof_adam_slice* s, const sof_adam_hparams* hp,
                                      std::string* why) {
    if (sof_status st = check_adam_slice(s, hp, 0, why); st != SOF_OK) return st;
    if (s->param_out != s->param || s->exp_avg_out != s->exp_avg ||
        s->exp_avg_sq_out != s->exp_avg_sq) {
        *why = "adam_rollback inverts an in-place step: param_out/exp_avg_out/exp_avg_sq_out must "
               "equal param/exp_avg/exp_avg_sq (separate-output steps need no rollback)";
        return SOF_ERR_INVALID_ARGUMENT;
    }
    if (hp->beta1 == 0.0f || hp->beta2 == 0.0f) {
        *why = "adam_rollback: beta1 or beta2 is 0 (not invertible)";
        return SOF_ERR_UNSUPPORTED;
    }
    if (hp->mode == SOF_ADAM_ADAMW && hp->weight_decay != 0.0f &&
        static_cast<float>(1.0 - static_cast<double>(hp->lr) * hp->weight_decay) == 0.0f) {
        *why = "adam_rollback: lr*weight_decay == 1 (not invertible)";
        return SOF_ERR_UNSUPPORTED;
    }
    return SOF_OK;
}

// Checks the arguments of grad_stats.
inline sof_status check_grad_stats(const void* grad, int32_t grad_dtype, int64_t n,
                                   const sof_adam_result* result, std::string* why) {
    if (n < 0 || (n > 0 && !grad) || !result || !valid_grad_dtype(grad_dtype)) {
        *why = "grad_stats: null grad or result, negative n, or grad_dtype not f32/bf16/f16";
        return SOF_ERR_INVALID_ARGUMENT;
    }
    return SOF_OK;
}

} // namespace sof::optim

#endif // SOF_OPTIM_CHECK_H
