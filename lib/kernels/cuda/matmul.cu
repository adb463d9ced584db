// CUDA twin of matmul.h: cuBLASLt products (bf16/fp32 in, fp32 compute), row-major as the CPU twin;
// bias and GELU in the epilogue, or (unfused) bias rows under the product and a GELU kernel.
#include "kernels/matmul.h"

#include <cstdint>

#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/pointwise.cuh"

namespace sof::kernels::cuda {

namespace {

// The unfused epilogue, before the product: every row of prod (N,OC) set to bias (OC), so that
// the product added onto it (beta 1) rounds A.B + bias once, as the CPU twin and the fused
// epilogue do.
template <class D> __global__ void fill_rows_kernel(D* prod, const D* bias, size_t total, int OC) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += stride)
        prod[i] = bias[i % static_cast<size_t>(OC)];
}

// The unfused epilogue, after the product: prod (N,OC) keeps the GELU input, out = gelu(prod).
template <class D> __global__ void gelu_kernel(D* out, const D* prod, size_t total) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += stride)
        out[i] = from_float<D>(gelu_tanh(to_float(prod[i])));
}

void check_stream(Blas& blas, void* stream, const char* op) {
    SOF_CHECK(blas.impl().stream == as_stream(stream),
              "%s: the cuBLASLt context was made for another stream (one kernels::cuda::Blas per "
              "stream: its workspace serves one product at a time)",
              op);
}

template <class T> const char* dtype_label() {
    return std::is_same_v<T, float> ? "fp32" : "bf16";
}

} // namespace

// A row-major (R, K) matrix is the column-major (K x R) one, so out^T (OC x N) = w (OC x C) @
// inp^T (C x N): A = w's memory seen as (C x OC), transposed; B = inp's memory (C x N) as is;
// D = out's memory (OC x N), ld OC. The epilogue's bias runs along D's rows (OC).
template <class T>
void matmul_forward(Blas& blas, T* out, T* pre_gelu, const T* inp, const T* w, const T* bias, int N,
                    int C, int OC, void* stream) {
    SOF_CHECK(N >= 0 && C > 0 && OC >= 0, "matmul_forward: bad shape N=%d C=%d OC=%d", N, C, OC);
    if (N == 0 || OC == 0) return;
    check_stream(blas, stream, "matmul_forward");
    GemmShape g;
    g.trans_a = true;
    g.trans_b = false;
    g.m = OC;
    g.n = N;
    g.k = C;
    g.lda = C;
    g.ldb = C;
    g.ldd = OC;
    g.ab_type = g.d_type = cuda_dtype<T>();
    GemmPtrs p;
    p.a = w;
    p.b = inp;
    p.d = out;
    if (pre_gelu) {
        g.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        g.aux_ld = OC;
        p.aux = pre_gelu;
        p.bias = bias;
    } else if (bias) {
        g.epilogue = CUBLASLT_EPILOGUE_BIAS;
        p.bias = bias;
    }
    // the GELU input's leading dimension must be a multiple of 8 (cublasLt.h); bias and GELU
    // input 16-byte aligned: the heuristic is told only A/B/C/D's alignment, and epilogue
    // kernels that assume 16 bytes fault on less (PyTorch and Marian fall back likewise). The
    // parameters are packed without padding, so a bias is often less aligned: unfused then.
    auto al16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    const bool fusable = g.epilogue != CUBLASLT_EPILOGUE_DEFAULT && (!pre_gelu || OC % 8 == 0) &&
                         (!bias || al16(bias)) && (!pre_gelu || al16(pre_gelu));
    if (fusable && blas.impl().gemm(g, p)) return;

    // unfused: the product into pre_gelu (or out), onto the bias rows when there is a bias
    // (beta 1: one rounding of A.B + bias, as the grouped product does), then GELU pointwise
    T* prod = pre_gelu ? pre_gelu : out;
    const size_t total = static_cast<size_t>(N) * OC;
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    g.aux_ld = 0;
    g.accumulate = bias != nullptr;
    if (bias) {
        fill_rows_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
            dev_ptr(prod), dev_ptr(bias), total, OC);
        SOF_CHECK_LAUNCH("matmul_forward bias rows");
    }
    p = GemmPtrs{};
    p.a = w;
    p.b = inp;
    p.d = prod;
    SOF_CHECK(blas.impl().gemm(g, p),
              "matmul_forward: cuBLASLt has no algorithm for N=%d C=%d OC=%d (%s%s): %s", N, C, OC,
              dtype_label<T>(), bias ? ", beta 1" : "", blas.impl().refused.c_str());
    if (!pre_gelu) return;
    gelu_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(dev_ptr(out), dev_ptr(prod),
                                                                       total);
    SOF_CHECK_LAUNCH("matmul_forward gelu");
}

// dinp (N,C) = dout (N,OC) @ w (OC,C): column-major dinp^T (C x N) = w^T (C x OC, stored as is)
// @ dout^T (OC x N, stored as is). dw (OC,C) += dout^T @ inp: column-major dw^T (C x OC) =
// inp^T (C x N, stored as is) @ dout (N x OC: dout^T stored (OC x N), transposed); D fp32, beta 1.
template <class T>
void matmul_backward(Blas& blas, T* dinp, float* dw, const T* dout, const T* inp, const T* w, int N,
                     int C, int OC, void* stream) {
    SOF_CHECK(N >= 0 && C > 0 && OC > 0, "matmul_backward: bad shape N=%d C=%d OC=%d", N, C, OC);
    if (N == 0) return;
    check_stream(blas, stream, "matmul_backward");
    const char* dt = dtype_label<T>();
    if (dinp) {
        GemmShape g;
        g.m = C;
        g.n = N;
        g.k = OC;
        g.lda = C;
        g.ldb = OC;
        g.ldd = C;
        g.ab_type = g.d_type = cuda_dtype<T>();
        GemmPtrs p;
        p.a = w;
        p.b = dout;
        p.d = dinp;
        SOF_CHECK(blas.impl().gemm(g, p),
                  "matmul_backward: cuBLASLt has no algorithm for dinp, N=%d C=%d OC=%d (%s): %s",
                  N, C, OC, dt, blas.impl().refused.c_str());
    }
    GemmShape g;
    g.trans_b = true;
    g.m = C;
    g.n = OC;
    g.k = N;
    g.lda = C;
    g.ldb = OC;
    g.ldd = C;
    g.ab_type = cuda_dtype<T>();
    g.d_type = CUDA_R_32F;
    g.accumulate = true;
    GemmPtrs p;
    p.a = inp;
    p.b = dout;
    p.d = dw;
    SOF_CHECK(blas.impl().gemm(g, p),
              "matmul_backward: cuBLASLt has no algorithm for dw, N=%d C=%d OC=%d (%s in, fp32 "
              "out): %s",
              N, C, OC, dt, blas.impl().refused.c_str());
}

template void matmul_forward<float>(Blas&, float*, float*, const float*, const float*, const float*,
                                    int, int, int, void*);
template void matmul_forward<core::bf16>(Blas&, core::bf16*, core::bf16*, const core::bf16*,
                                         const core::bf16*, const core::bf16*, int, int, int,
                                         void*);
template void matmul_backward<float>(Blas&, float*, float*, const float*, const float*,
                                     const float*, int, int, int, void*);
template void matmul_backward<core::bf16>(Blas&, core::bf16*, float*, const core::bf16*,
                                          const core::bf16*, const core::bf16*, int, int, int,
                                          void*);

} // namespace sof::kernels::cuda
