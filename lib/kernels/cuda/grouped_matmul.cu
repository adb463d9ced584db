// CUDA twin of grouped_matmul.h: forward and dX as one cublasGemmGroupedBatchedEx call (a group
// per expert with rows; cublasGemmEx per group before cuBLAS 12.5), dW as cublasGemmEx per expert
// (bf16 in, fp32 accumulated), biases by kernels that sum each column's rows in order. Row-major
// as the CPU twin (matmul.cu's mapping).
#include "kernels/grouped_matmul.h"

#include <vector>

#include "kernels/cuda/blas.cuh"
#include "kernels/scratch.h"

namespace sof::kernels::cuda {

namespace {

// The expert owning row r (offsets (E+1), non-decreasing): the last e with offsets[e] <= r.
__device__ __forceinline__ int expert_of(const int* offsets, int E, int r) {
    int lo = 0, hi = E; // offsets[lo] <= r < offsets[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (offsets[mid] <= r)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// out row r = the bias of its expert: the grouped GEMM then adds its product (beta = 1), one
// rounding of product + bias, as the CPU twin (which fills the rows and accumulates onto them).
template <class D>
__global__ void fill_bias_kernel(D* out, const D* bias, const int* offsets, int E, size_t total,
                                 int OC) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const int r = static_cast<int>(j / static_cast<size_t>(OC));
        const size_t c = j % static_cast<size_t>(OC);
        const int e = expert_of(offsets, E, r);
        out[j] = bias[static_cast<size_t>(e) * OC + c];
    }
}

// dbias[e, c] += dout rows of e in order (blockIdx.y = e): the CPU twin's additions exactly.
template <class D>
__global__ void expert_bias_grad_kernel(float* dbias, const D* dout, const int* offsets, int OC) {
    const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= OC) return;
    const int e = static_cast<int>(blockIdx.y);
    float acc = dbias[static_cast<size_t>(e) * OC + c];
    for (int r = offsets[e]; r < offsets[e + 1]; r++)
        acc = __fadd_rn(acc, to_float(dout[static_cast<size_t>(r) * OC + c]));
    dbias[static_cast<size_t>(e) * OC + c] = acc;
}

// The host arrays of one grouped call (one problem per group) and its device pointer arrays,
// uploaded from a host block freed by a host function on the stream once the copy has run.
struct Grouped {
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m, n, k, lda, ldb, ldc, size;
    std::vector<float> alpha, beta;
    std::vector<const void*> a, b;
    std::vector<void*> c;
    void add(cublasOperation_t ta_, cublasOperation_t tb_, int m_, int n_, int k_, const void* a_,
             int lda_, const void* b_, int ldb_, void* c_, int ldc_, float beta_ = 0.0f) {
        ta.push_back(ta_);
        tb.push_back(tb_);
        m.push_back(m_);
        n.push_back(n_);
        k.push_back(k_);
        a.push_back(a_);
        lda.push_back(lda_);
        b.push_back(b_);
        ldb.push_back(ldb_);
        c.push_back(c_);
        ldc.push_back(ldc_);
        size.push_back(1);
        alpha.push_back(1.0f);
        beta.push_back(beta_);
    }
};

// The same products one by one: cuBLAS before 12.5 (no grouped interface), or one without this
// type combination in it (deterministic too, though not necessarily the grouped kernel's bits).
cublasStatus_t run_one_by_one(cublasHandle_t h, const Grouped& g, cudaDataType_t dt) {
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    for (size_t i = 0; s == CUBLAS_STATUS_SUCCESS && i < g.m.size(); i++)
        s = cublasGemmEx(h, g.ta[i], g.tb[i], g.m[i], g.n[i], g.k[i], &g.alpha[i], g.a[i], dt,
                         g.lda[i], g.b[i], dt, g.ldb[i], &g.beta[i], g.c[i], dt, g.ldc[i],
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s;
}

#if CUBLAS_VERSION >= 120500
struct PtrBlock {
    std::vector<void*> p;
};

void CUDART_CB drop_ptrs(void* arg) {
    delete static_cast<PtrBlock*>(arg);
}

// The device pointer array of the grouped call lives in the stream's scratch (free again for the
// next op by stream order); the host copy of it stays alive until the upload has run.
cublasStatus_t run_grouped_call(cublasHandle_t h, const Grouped& g, cudaDataType_t dt,
                                cudaStream_t st, Scratch* scratch, const char* op) {
    const int G = static_cast<int>(g.m.size());
    auto* block = new PtrBlock;
    block->p.reserve(3 * static_cast<size_t>(G));
    for (const void* x : g.a)
        block->p.push_back(const_cast<void*>(x));
    for (const void* x : g.b)
        block->p.push_back(const_cast<void*>(x));
    for (void* x : g.c)
        block->p.push_back(x);
    const size_t bytes = block->p.size() * sizeof(void*);
    void** dptr = nullptr;
    try {
        dptr = static_cast<void**>(scratch_get(scratch, bytes, op));
    } catch (...) {
        delete block;
        throw;
    }
    cudaError_t e = cudaMemcpyAsync(dptr, block->p.data(), bytes, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaLaunchHostFunc(st, drop_ptrs, block);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaStreamSynchronize(st); // the copy, if enqueued, must finish before the block goes
        delete block;
        SOF_CHECK_CUDA(e);
    }
    const cublasStatus_t s = cublasGemmGroupedBatchedEx(
        h, g.ta.data(), g.tb.data(), g.m.data(), g.n.data(), g.k.data(), g.alpha.data(),
        const_cast<const void* const*>(dptr), dt, g.lda.data(),
        const_cast<const void* const*>(dptr + G), dt, g.ldb.data(), g.beta.data(), dptr + 2 * G, dt,
        g.ldc.data(), G, g.size.data(), CUBLAS_COMPUTE_32F);
    return s == CUBLAS_STATUS_NOT_SUPPORTED ? run_one_by_one(h, g, dt) : s;
}
#endif

template <class T>
void run_grouped(Blas& blas, const Grouped& g, cudaStream_t st, Scratch* scratch, const char* op) {
    if (g.m.empty()) return;
    const cudaDataType_t dt = cuda_dtype<T>();
    const cublasHandle_t h = blas.impl().classic();
#if CUBLAS_VERSION >= 120500
    const cublasStatus_t s = run_grouped_call(h, g, dt, st, scratch, op);
#else
    (void)st;
    (void)scratch;
    const cublasStatus_t s = run_one_by_one(h, g, dt);
#endif
    if (s != CUBLAS_STATUS_SUCCESS)
        SOF_FAIL(Runtime, "%s: grouped GEMM failed: %s (%s, %d groups)", op,
                 cublasLtGetStatusName(s), dt == CUDA_R_32F ? "fp32" : "bf16",
                 static_cast<int>(g.m.size()));
}

void check_stream(Blas& blas, void* stream, const char* op) {
    SOF_CHECK(blas.impl().stream == as_stream(stream),
              "%s: the cuBLAS context was made for another stream (one kernels::cuda::Blas per "
              "stream)",
              op);
}

} // namespace

// out_e^T (OC x rows) = w_e (stored (OC,C): column-major C x OC, transposed) @ inp_e^T (C x rows)
template <class T>
void grouped_matmul_forward(Blas& blas, T* out, const T* inp, const T* w, const T* bias,
                            const GroupedShape& s, void* stream, Scratch* scratch) {
    check_stream(blas, stream, "grouped_matmul_forward");
    const cudaStream_t st = as_stream(stream);
    const int* off = s.host_offsets;
    const size_t wsz = static_cast<size_t>(s.OC) * s.C;
    const size_t total = static_cast<size_t>(off[s.E]) * s.OC;
    if (bias && total > 0) { // every row [0, P) belongs to an expert with rows: all overwritten
        SOF_CHECK(s.offsets,
                  "grouped_matmul_forward (CUDA): the device offsets are required with bias");
        fill_bias_kernel<<<blocks_for(total), kThreads, 0, st>>>(dev_ptr(out), dev_ptr(bias),
                                                                 s.offsets, s.E, total, s.OC);
        SOF_CHECK_LAUNCH("grouped_matmul_forward bias");
    }
    Grouped g;
    for (int e = 0; e < s.E; e++) {
        const int rows = off[e + 1] - off[e];
        if (rows == 0) continue;
        g.add(CUBLAS_OP_T, CUBLAS_OP_N, s.OC, rows, s.C, w + static_cast<size_t>(e) * wsz, s.C,
              inp + static_cast<size_t>(off[e]) * s.C, s.C,
              out + static_cast<size_t>(off[e]) * s.OC, s.OC, bias ? 1.0f : 0.0f);
    }
    run_grouped<T>(blas, g, st, scratch, "grouped_matmul_forward");
}

// dinp_e^T (C x rows) = w_e^T (C x OC: w stored as is) @ dout_e^T (OC x rows); dw_e^T (C x OC) +=
// inp_e^T (C x rows) @ dout_e (rows x OC: dout^T stored (OC x rows), transposed), fp32 out.
template <class T>
void grouped_matmul_backward(Blas& blas, T* dinp, float* dw, float* dbias, const T* dout,
                             const T* inp, const T* w, const GroupedShape& s, void* stream,
                             Scratch* scratch) {
    check_stream(blas, stream, "grouped_matmul_backward");
    const cudaStream_t st = as_stream(stream);
    const int* off = s.host_offsets;
    const size_t wsz = static_cast<size_t>(s.OC) * s.C;
    if (dinp) {
        Grouped g;
        for (int e = 0; e < s.E; e++) {
            const int rows = off[e + 1] - off[e];
            if (rows == 0) continue;
            g.add(CUBLAS_OP_N, CUBLAS_OP_N, s.C, rows, s.OC, w + static_cast<size_t>(e) * wsz, s.C,
                  dout + static_cast<size_t>(off[e]) * s.OC, s.OC,
                  dinp + static_cast<size_t>(off[e]) * s.C, s.C);
        }
        run_grouped<T>(blas, g, st, scratch, "grouped_matmul_backward dinp");
    }
    const cublasHandle_t h = blas.impl().classic();
    const float one = 1.0f;
    for (int e = 0; e < s.E; e++) {
        const int rows = off[e + 1] - off[e];
        if (rows == 0) continue; // dw_e += nothing
        const cublasStatus_t r =
            cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, s.C, s.OC, rows, &one,
                         inp + static_cast<size_t>(off[e]) * s.C, cuda_dtype<T>(), s.C,
                         dout + static_cast<size_t>(off[e]) * s.OC, cuda_dtype<T>(), s.OC, &one,
                         dw + static_cast<size_t>(e) * wsz, CUDA_R_32F, s.C, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
        if (r != CUBLAS_STATUS_SUCCESS)
            SOF_FAIL(Runtime,
                     "grouped_matmul_backward: cublasGemmEx for expert %d's dw failed: %s (%d "
                     "rows, C=%d, OC=%d)",
                     e, cublasLtGetStatusName(r), rows, s.C, s.OC);
    }
    if (!dbias) return;
    SOF_CHECK(s.offsets, "grouped_matmul_backward (CUDA): the device offsets are required with "
                         "dbias");
    const dim3 grid(static_cast<unsigned>((s.OC + kThreads - 1) / kThreads),
                    static_cast<unsigned>(s.E));
    expert_bias_grad_kernel<<<grid, kThreads, 0, st>>>(dbias, dev_ptr(dout), s.offsets, s.OC);
    SOF_CHECK_LAUNCH("grouped_matmul_backward dbias");
}

template void grouped_matmul_forward<float>(Blas&, float*, const float*, const float*, const float*,
                                            const GroupedShape&, void*, Scratch*);
template void grouped_matmul_forward<core::bf16>(Blas&, core::bf16*, const core::bf16*,
                                                 const core::bf16*, const core::bf16*,
                                                 const GroupedShape&, void*, Scratch*);
template void grouped_matmul_backward<float>(Blas&, float*, float*, float*, const float*,
                                             const float*, const float*, const GroupedShape&, void*,
                                             Scratch*);
template void grouped_matmul_backward<core::bf16>(Blas&, core::bf16*, float*, float*,
                                                  const core::bf16*, const core::bf16*,
                                                  const core::bf16*, const GroupedShape&, void*,
                                                  Scratch*);

} // namespace sof::kernels::cuda
