// The tensor-core attention (bf16, head dims 64 and 128) as attention.cu reaches it: whether it
// applies to a call, and its forward and backward launches (attention_tc.cu).
#pragma once

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "kernels/attention.h"

namespace sof::kernels::cuda {

// Null when the tensor-core kernel runs these arguments, else why not (for messages).
const char* attention_tc_refusal(const AttnArgs<core::bf16>& a);

// out, lse as attention_forward (q_begin 0). Needs attention_tc_refusal(a) == null.
void attention_tc_forward(core::bf16* out, float* lse, const AttnArgs<core::bf16>& a,
                          cudaStream_t s);

// dq, dk, dv from dout, lse and delta (rowsum(dout * out), computed before on the stream).
void attention_tc_backward(const AttnGrads<core::bf16>& d, const core::bf16* dout, const float* lse,
                           const float* delta, const AttnArgs<core::bf16>& a, cudaStream_t s);

} // namespace sof::kernels::cuda
