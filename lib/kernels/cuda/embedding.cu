// CUDA twin of embedding.h: row gathers forward; the backward sorts (id, position) pairs on the
// host and gives each distinct row one block that adds its positions in order (no atomics).
#include "kernels/embedding.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/scratch.h"

namespace sof::kernels::cuda {

namespace {

template <class D>
__global__ void embedding_forward_kernel(D* out, const int* tokens, const int* positions,
                                         const D* wte, const D* wpe, size_t total, int C) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(C), i = j % static_cast<size_t>(C);
        float v = to_float(wte[static_cast<size_t>(tokens[n]) * C + i]);
        if (wpe) v += to_float(wpe[static_cast<size_t>(positions[n]) * C + i]);
        out[j] = from_float<D>(v);
    }
}

// Block (r, y) adds, for the channels of its y tile, the dout rows order[starts[r] ..
// starts[r+1]) (ascending positions) into table row rows[r], one after the other starting from
// the row's value: the same additions in the same order as the CPU twin (bitwise for fp32 dout).
template <class D>
__global__ void embedding_grad_kernel(float* table, const D* dout, const int* plan, int N,
                                      int nrows, int C) {
    const int c = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
    if (c >= C) return;
    const int* order = plan;                // (N)
    const int* starts = plan + N;           // (nrows + 1)
    const int* rows = plan + N + nrows + 1; // (nrows)
    const int r = static_cast<int>(blockIdx.x);
    float* dst = table + static_cast<size_t>(rows[r]) * C + c;
    float acc = *dst;
    for (int j = starts[r]; j < starts[r + 1]; j++)
        acc = __fadd_rn(acc, to_float(dout[static_cast<size_t>(order[j]) * C + c]));
    *dst = acc;
}

// The host plan of one table's backward: [order (N) | starts (nrows+1) | rows (nrows)], kept alive
// until the stream has copied it (deleted by a host function on the stream).
struct Plan {
    std::vector<int> data;
};

void CUDART_CB drop_plan(void* arg) {
    delete static_cast<Plan*>(arg);
}

template <class T>
void table_grad(float* table, const T* dout, const int* ids, int N, int C, cudaStream_t st,
                Scratch* scratch, const char* what) {
    auto* plan = new Plan;
    int nrows = 0;
    try {
        std::vector<int> order(static_cast<size_t>(N));
        std::iota(order.begin(), order.end(), 0);
        for (int n = 0; n < N; n++)
            SOF_CHECK(ids[n] >= 0, "%s: negative id %d at position %d", what, ids[n], n);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
        std::vector<int> starts, rows;
        for (int j = 0; j < N; j++) {
            if (j == 0 || ids[order[j]] != ids[order[j - 1]]) {
                starts.push_back(j);
                rows.push_back(ids[order[j]]);
            }
        }
        starts.push_back(N);
        nrows = static_cast<int>(rows.size());
        plan->data = std::move(order);
        plan->data.insert(plan->data.end(), starts.begin(), starts.end());
        plan->data.insert(plan->data.end(), rows.begin(), rows.end());
    } catch (...) {
        delete plan;
        throw;
    }
    const size_t bytes = plan->data.size() * sizeof(int); // embedding_scratch_bytes(N, nrows)
    int* dplan = nullptr;
    try {
        dplan = static_cast<int*>(scratch_get(scratch, bytes, what));
    } catch (...) {
        delete plan;
        throw;
    }
    cudaError_t e = cudaMemcpyAsync(dplan, plan->data.data(), bytes, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaLaunchHostFunc(st, drop_plan, plan);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaStreamSynchronize(st); // the copy, if enqueued, must finish before the plan goes
        delete plan;
        SOF_CHECK_CUDA_STATUS(e, "embedding_backward: plan upload");
    }
    // one block row per distinct id (grid.x up to 2^31-1), the channels in grid.y tiles
    const dim3 grid(static_cast<unsigned>(nrows),
                    static_cast<unsigned>((C + kThreads - 1) / kThreads));
    embedding_grad_kernel<<<grid, kThreads, 0, st>>>(table, dev_ptr(dout), dplan, N, nrows, C);
    SOF_CHECK_LAUNCH(what);
}

} // namespace

template <class T>
void embedding_forward(T* out, const int* tokens, const int* positions, const T* wte, const T* wpe,
                       int N, int C, void* stream) {
    if (N <= 0 || C <= 0) return;
    const size_t total = static_cast<size_t>(N) * C;
    embedding_forward_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(out), tokens, positions, dev_ptr(wte), dev_ptr(wpe), total, C);
    SOF_CHECK_LAUNCH("embedding_forward");
}

template <class T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens,
                        const int* positions, const int* host_tokens, const int* host_positions,
                        int N, int C, void* stream, Scratch* scratch) {
    (void)tokens; // the device ids are not needed: the plan is built from the host copies
    (void)positions;
    if (N <= 0 || C <= 0) return;
    SOF_CHECK(host_tokens, "embedding_backward (CUDA): host_tokens is required");
    SOF_CHECK(!dwpe || host_positions,
              "embedding_backward (CUDA): host_positions is required with dwpe");
    const cudaStream_t st = as_stream(stream);
    table_grad(dwte, dout, host_tokens, N, C, st, scratch, "embedding_backward (tokens)");
    if (dwpe)
        table_grad(dwpe, dout, host_positions, N, C, st, scratch, "embedding_backward (positions)");
}

template void embedding_forward<float>(float*, const int*, const int*, const float*, const float*,
                                       int, int, void*);
template void embedding_forward<core::bf16>(core::bf16*, const int*, const int*, const core::bf16*,
                                            const core::bf16*, int, int, void*);
template void embedding_backward<float>(float*, float*, const float*, const int*, const int*,
                                        const int*, const int*, int, int, void*, Scratch*);
template void embedding_backward<core::bf16>(float*, float*, const core::bf16*, const int*,
                                             const int*, const int*, const int*, int, int, void*,
                                             Scratch*);

} // namespace sof::kernels::cuda
