// cuda::Blas (blas.h): the cuBLASLt handle of one stream, its workspace (allocated once) and the
// matmul descriptors + heuristic algorithm cached per product, so a shape is planned only once.
#include "kernels/cuda/blas.cuh"

#include <cstdint>
#include <utility>

#include "core/error.h"

namespace sof::kernels::cuda {

namespace {

// Largest power of two (<= 256) dividing the address: the heuristic must know how aligned the
// pointers are (cuBLASLt assumes 256 bytes unless told), and a cached algorithm is only reused
// for pointers at least as aligned.
int64_t alignment(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (a == 0) return 256;
    int64_t al = 1;
    while (al < 256 && a % static_cast<uintptr_t>(al * 2) == 0)
        al *= 2;
    return al;
}

bool has_bias(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_aux(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

void destroy(Blas::Impl::Plan& pl) noexcept {
    if (pl.a) cublasLtMatrixLayoutDestroy(pl.a);
    if (pl.b) cublasLtMatrixLayoutDestroy(pl.b);
    if (pl.d) cublasLtMatrixLayoutDestroy(pl.d);
    if (pl.desc) cublasLtMatmulDescDestroy(pl.desc);
    pl = Blas::Impl::Plan{};
}

template <class V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& v) {
    SOF_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)));
}

template <class V>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
              const V& v) {
    SOF_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
}

// Descriptors of the product and the heuristic's best kCandidates algorithms, best first
// (pl.nalgos = 0 when it has none).
// The bias and aux pointers are set before the heuristic (cublasLt.h: it reads their alignment;
// matmul.cu fuses only 16-byte-aligned ones all the same).
void make_plan(Blas::Impl& im, const GemmShape& g, const GemmPtrs& p, Blas::Impl::Plan& pl) {
    SOF_CHECK_CUBLAS(cublasLtMatmulDescCreate(&pl.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set_desc(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, tb);
    const uint32_t epi = static_cast<uint32_t>(g.epilogue);
    set_desc(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
    // bias and GELU input default to D's element type (what the twins pass)
    if (has_bias(g.epilogue)) set_desc(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    if (has_aux(g.epilogue)) {
        set_desc(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
        set_desc(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
    }
    const uint64_t am = static_cast<uint64_t>(g.trans_a ? g.k : g.m);
    const uint64_t an = static_cast<uint64_t>(g.trans_a ? g.m : g.k);
    const uint64_t bm = static_cast<uint64_t>(g.trans_b ? g.n : g.k);
    const uint64_t bn = static_cast<uint64_t>(g.trans_b ? g.k : g.n);
    SOF_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&pl.a, g.ab_type, am, an, g.lda));
    SOF_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&pl.b, g.ab_type, bm, bn, g.ldb));
    SOF_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&pl.d, g.d_type, static_cast<uint64_t>(g.m),
                                                static_cast<uint64_t>(g.n), g.ldd));

    cublasLtMatmulPreference_t pref = nullptr;
    SOF_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res[Blas::Impl::kCandidates]{};
    int found = 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    try {
        set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                 static_cast<uint64_t>(im.workspace_bytes));
        set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                 static_cast<uint32_t>(alignment(p.a)));
        set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                 static_cast<uint32_t>(alignment(p.b)));
        set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                 static_cast<uint32_t>(alignment(p.d)));
        set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                 static_cast<uint32_t>(alignment(p.d)));
        // a bf16 (or fp16) output: split-K may only reduce in the compute type (fp32), never
        // in place in the output buffer's type, so each output is rounded to bf16 once
        if (g.d_type != CUDA_R_32F)
            set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                     static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
        st = cublasLtMatmulAlgoGetHeuristic(im.handle, pl.desc, pl.a, pl.b, pl.d, pl.d, pref,
                                            Blas::Impl::kCandidates, res, &found);
    } catch (...) {
        cublasLtMatmulPreferenceDestroy(pref);
        throw;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    pl.nalgos = 0;
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
        im.refused = "the heuristic supports no algorithm (CUBLAS_STATUS_NOT_SUPPORTED)";
        return;
    }
    SOF_CHECK_CUBLAS(st);
    for (int i = 0; i < found && i < Blas::Impl::kCandidates; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) pl.algos[pl.nalgos++] = res[i].algo;
    if (pl.nalgos == 0) im.refused = "the heuristic returned no algorithm";
}

// A launch status that refuses the algorithm (the next candidate may launch) rather than fails.
bool refusal(cublasStatus_t st) {
    return st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE ||
           st == CUBLAS_STATUS_ARCH_MISMATCH;
}

} // namespace

bool Blas::Impl::gemm(const GemmShape& g, const GemmPtrs& p) {
    const Key key = {g.trans_a ? 1 : 0,
                     g.trans_b ? 1 : 0,
                     g.m,
                     g.n,
                     g.k,
                     g.lda,
                     g.ldb,
                     g.ldd,
                     static_cast<int64_t>(g.ab_type),
                     static_cast<int64_t>(g.d_type),
                     static_cast<int64_t>(g.epilogue),
                     g.aux_ld,
                     g.accumulate ? 1 : 0,
                     alignment(p.a),
                     alignment(p.b),
                     alignment(p.d),
                     has_bias(g.epilogue) ? alignment(p.bias) : 0,
                     has_aux(g.epilogue) ? alignment(p.aux) : 0};
    std::lock_guard<std::mutex> lk(mu);
    auto it = plans.find(key);
    if (it == plans.end()) {
        Plan pl;
        try {
            make_plan(*this, g, p, pl);
        } catch (...) {
            destroy(pl);
            throw;
        }
        it = plans.emplace(key, pl).first;
    }
    Plan& pl = it->second;
    if (has_bias(g.epilogue)) set_desc(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    if (has_aux(g.epilogue)) set_desc(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
    const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
    // every cuBLASLt reduction scheme (split-K included) is ordered, so one algorithm gives the
    // same bits on every run: the first candidate that launches is kept for the key. A candidate
    // the heuristic offered can still be refused at launch (seen in PyTorch for fused epilogues
    // with mixed alignments): it is dropped and the next one tried; with none left the caller
    // falls back (the unfused product) or reports `refused`.
    while (pl.ok()) {
        const cublasStatus_t st =
            cublasLtMatmul(handle, pl.desc, &alpha, p.a, pl.a, p.b, pl.b, &beta, p.d, pl.d, p.d,
                           pl.d, &pl.algos[0], workspace, workspace_bytes, stream);
        if (st == CUBLAS_STATUS_SUCCESS) {
            pl.kept = true;
            return true;
        }
        if (!refusal(st) || pl.kept) SOF_CHECK_CUBLAS(st); // a kept algorithm does not refuse
        refused = std::string("every candidate algorithm was refused at launch, the last with ") +
                  cublasLtGetStatusName(st);
        for (int i = 1; i < pl.nalgos; i++)
            pl.algos[i - 1] = pl.algos[i];
        pl.nalgos--;
    }
    return false;
}

cublasHandle_t Blas::Impl::classic() {
    std::lock_guard<std::mutex> lk(mu);
    if (!classic_handle) {
        cublasHandle_t h = nullptr;
        SOF_CHECK_CUBLAS(cublasCreate(&h));
        cublasStatus_t st = cublasSetStream(h, stream);
        // split-K partial sums kept in the compute type (fp32) for bf16 outputs: each output
        // rounded once to bf16, as the cuBLASLt products (REDUCTION_SCHEME_COMPUTE_TYPE above)
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasSetMathMode(
                h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
        if (st != CUBLAS_STATUS_SUCCESS) cublasDestroy(h);
        SOF_CHECK_CUBLAS(st);
        classic_handle = h;
    }
    return classic_handle;
}

Blas::Impl::~Impl() {
    if (classic_handle) cublasDestroy(classic_handle);
    for (auto& kv : plans)
        destroy(kv.second);
    // cudaFree waits for the products still using the workspace; the stream may already be
    // gone, so it is not touched here
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
    (void)cudaGetLastError();
}

std::unique_ptr<Blas> Blas::create(void* stream, size_t workspace_bytes) {
    auto im = std::make_unique<Impl>();
    im->stream = as_stream(stream);
    SOF_CHECK_CUBLAS(cublasLtCreate(&im->handle));
    if (workspace_bytes > 0) {
        const cudaError_t e = cudaMalloc(&im->workspace, workspace_bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            SOF_FAIL(Runtime,
                     "cuBLASLt workspace: cannot allocate %zu bytes of device memory (%s); free "
                     "device memory or pass a smaller workspace to kernels::cuda::Blas::create",
                     workspace_bytes, cudaGetErrorString(e));
        }
    }
    im->workspace_bytes = workspace_bytes;
    return std::unique_ptr<Blas>(new Blas(im.release()));
}

Blas::~Blas() {
    delete impl_;
}

size_t Blas::workspace_bytes() const {
    return impl_->workspace_bytes;
}

size_t Blas::cached_shapes() const {
    std::lock_guard<std::mutex> lk(impl_->mu);
    return impl_->plans.size();
}

} // namespace sof::kernels::cuda
