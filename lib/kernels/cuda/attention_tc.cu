// The tensor-core attention's kernels and launches: the tile code of flash_fwd.cuh and
// flash_bwd.cuh on the GPU machine (flash_device.cuh), bf16 in and out, head dims 64 and 128.
#include "kernels/cuda/attention_tc.cuh"

#include <cmath>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/cuda/flash_bwd.cuh"
#include "kernels/cuda/flash_device.cuh"
#include "kernels/cuda/flash_fwd.cuh"

namespace sof::kernels::cuda {

namespace {

// cp.async, ldmatrix and the bf16 mma.m16n8k16 need sm_80: an older architecture in
// CMAKE_CUDA_ARCHITECTURES compiles these kernels empty, and the host refuses them there
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SOF_TC_ARCH_OK 1
#else
#define SOF_TC_ARCH_OK 0
#endif

using flash::DeviceMachine;
using flash::Params;

template <int D, bool kDrop>
__global__ void __launch_bounds__(flash::kThreads) tc_fwd_kernel(Params p) {
#if SOF_TC_ARCH_OK
    extern __shared__ __align__(128) unsigned char smem[];
    DeviceMachine m{smem};
    flash::fwd_block<D, kDrop>(m, p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                               static_cast<int>(blockIdx.z));
#else
    (void)p;
    __trap(); // refused on the host (attention_tc_refusal)
#endif
}

template <int D, bool kDrop>
__global__ void __launch_bounds__(flash::kThreads) tc_dkdv_kernel(Params p) {
#if SOF_TC_ARCH_OK
    extern __shared__ __align__(128) unsigned char smem[];
    DeviceMachine m{smem};
    flash::dkdv_block<D, kDrop>(m, p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                                static_cast<int>(blockIdx.z));
#else
    (void)p;
    __trap(); // refused on the host (attention_tc_refusal)
#endif
}

template <int D, bool kDrop>
__global__ void __launch_bounds__(flash::kThreads) tc_dq_kernel(Params p) {
#if SOF_TC_ARCH_OK
    extern __shared__ __align__(128) unsigned char smem[];
    DeviceMachine m{smem};
    flash::dq_block<D, kDrop>(m, p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                              static_cast<int>(blockIdx.z));
#else
    (void)p;
    __trap(); // refused on the host (attention_tc_refusal)
#endif
}

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

const uint16_t* bits(const core::bf16* p) {
    return reinterpret_cast<const uint16_t*>(p);
}
uint16_t* bits(core::bf16* p) {
    return reinterpret_cast<uint16_t*>(p);
}

Params params_of(const AttnArgs<core::bf16>& a, const char* op) {
    Params p{};
    p.q = bits(a.q);
    p.k = bits(a.k);
    p.v = bits(a.v);
    p.ldq = a.ldq;
    p.ldk = a.ldk;
    p.ldv = a.ldv;
    p.ldo = a.ldo;
    p.seg = a.segments;
    p.B = a.B;
    p.T = a.T;
    p.NH = a.num_heads;
    p.group = a.num_heads / a.num_kv_heads;
    p.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    p.scale_log2 = p.scale * flash::kLog2e;
    p.vec = aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && a.ldq % 8 == 0 &&
            a.ldk % 8 == 0 && a.ldv % 8 == 0 && a.ldo % 8 == 0;
    p.window = a.window;
    p.sinks = a.sinks;
    p.drop = detail::check_attention_features(a.window, a.dropout, a.dropout_key, a.B, a.T,
                                              a.num_heads, op);
    return p;
}

// More than 48 KiB of dynamic shared memory needs the kernel's limit raised (each launch: no
// state kept between calls).
template <class K> void launch(K kernel, dim3 grid, int smem, const Params& p, cudaStream_t s) {
    SOF_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<grid, flash::kThreads, static_cast<size_t>(smem), s>>>(p);
    SOF_CHECK_CUDA(cudaGetLastError());
}

// kDrop: the instantiations with probability dropout (p.drop active).
template <int D, bool kDrop> void forward(const Params& p, int NH, int B, cudaStream_t s) {
    using C = flash::FwdCfg<D>;
    const dim3 grid(static_cast<unsigned>(flash::ceil_div(p.T, C::kBr)), NH, B);
    launch(tc_fwd_kernel<D, kDrop>, grid, C::kSmem, p, s);
}

template <int D, bool kDrop>
void backward(const Params& p, int NH, int NKV, int B, cudaStream_t s) {
    using C = flash::BwdCfg<D>;
    const dim3 kv_grid(static_cast<unsigned>(flash::ceil_div(p.T, C::kBc)), NKV, B);
    launch(tc_dkdv_kernel<D, kDrop>, kv_grid, C::kSmemKV, p, s);
    const dim3 q_grid(static_cast<unsigned>(flash::ceil_div(p.T, C::kBrQ)), NH, B);
    launch(tc_dq_kernel<D, kDrop>, q_grid, C::kSmemQ, p, s);
}

template <int D> void forward_any(const Params& p, int NH, int B, cudaStream_t s) {
    if (p.drop.mask.active())
        forward<D, true>(p, NH, B, s);
    else
        forward<D, false>(p, NH, B, s);
}

template <int D> void backward_any(const Params& p, int NH, int NKV, int B, cudaStream_t s) {
    if (p.drop.mask.active())
        backward<D, true>(p, NH, NKV, B, s);
    else
        backward<D, false>(p, NH, NKV, B, s);
}

} // namespace

const char* attention_tc_refusal(const AttnArgs<core::bf16>& a) {
    if (a.head_dim != 64 && a.head_dim != 128) return "head_dim is not 64 or 128";
    if (a.q_begin != 0) return "q_begin != 0 (KV-cache decoding runs the CUDA-core kernel)";
    if (a.B > 65535 || a.num_heads > 65535) return "B or num_heads above 65535 (grid limits)";
    int dev = 0, major = 0;
    SOF_CHECK_CUDA(cudaGetDevice(&dev));
    SOF_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8) return "the GPU is older than sm_80 (no bf16 mma.sync, cp.async)";
    return nullptr;
}

void attention_tc_forward(core::bf16* out, float* lse, const AttnArgs<core::bf16>& a,
                          cudaStream_t s) {
    Params p = params_of(a, "attention_forward");
    p.out = bits(out);
    p.lse_out = lse;
    p.vec = p.vec && aligned16(out);
    if (a.head_dim == 64)
        forward_any<64>(p, a.num_heads, a.B, s);
    else
        forward_any<128>(p, a.num_heads, a.B, s);
}

void attention_tc_backward(const AttnGrads<core::bf16>& d, const core::bf16* dout, const float* lse,
                           const float* delta, const AttnArgs<core::bf16>& a, cudaStream_t s) {
    Params p = params_of(a, "attention_backward");
    p.dout = bits(dout);
    p.lse = lse;
    p.delta = delta;
    p.dq = bits(d.q);
    p.dk = bits(d.k);
    p.dv = bits(d.v);
    p.lddq = d.ldq;
    p.lddk = d.ldk;
    p.lddv = d.ldv;
    p.vec = p.vec && aligned16(dout) && aligned16(d.q) && aligned16(d.k) && aligned16(d.v) &&
            d.ldq % 8 == 0 && d.ldk % 8 == 0 && d.ldv % 8 == 0;
    if (a.head_dim == 64)
        backward_any<64>(p, a.num_heads, a.num_kv_heads, a.B, s);
    else
        backward_any<128>(p, a.num_heads, a.num_kv_heads, a.B, s);
}

} // namespace sof::kernels::cuda
