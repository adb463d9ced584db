// Throughput of gpu_adam against a copy-kernel ceiling with Adam's access pattern (same run).
// Usage: bench_gpu_adam [N params, default 268435456] [iterations, default 20]. Not a ctest.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "optim/sof_optim_abi.h"

extern "C" const sof_optim_plugin* sof_optim_plugin_get(void);

namespace {

void ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

// The ceiling: read p, g, m, v; write p', m', v' and a 2-byte copy; trivial arithmetic.
__global__ void ceiling_kernel(const float4* p, const float4* g, const float4* m, const float4* v,
                               float4* po, float4* mo, float4* vo, uint2* lowp, int64_t n4) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4;
         i += int64_t(gridDim.x) * blockDim.x) {
        float4 a = p[i], b = g[i], c = m[i], d = v[i];
        float4 x = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        __stcs(po + i, x);
        __stcs(mo + i, make_float4(c.x + b.x, c.y + b.y, c.z + b.z, c.w + b.w));
        __stcs(vo + i, make_float4(d.x + b.x, d.y + b.y, d.z + b.z, d.w + b.w));
        if (lowp)
            __stcs(lowp + i,
                   make_uint2(__float_as_uint(x.x) >> 16 | (__float_as_uint(x.y) & 0xffff0000u),
                              __float_as_uint(x.z) >> 16 | (__float_as_uint(x.w) & 0xffff0000u)));
    }
}

} // namespace

int main(int argc, char** argv) {
    int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 28);
    int iters = argc > 2 ? std::atoi(argv[2]) : 20;
    n = n / 4 * 4;
    const sof_optim_plugin* api = sof_optim_plugin_get();
    if (api->score() <= 0) {
        std::printf("SKIPPED: gpu_adam scores 0 here (no usable CUDA device)\n");
        return 77;
    }
    cudaDeviceProp prop{};
    ok(cudaGetDeviceProperties(&prop, 0), "props");
    sof_optim_init init{sizeof(sof_optim_init), 0, 0};
    sof_optim_ctx* ctx = nullptr;
    if (api->create(&init, &ctx) != SOF_OK) return 1;

    size_t b4 = size_t(n) * 4;
    float *p, *g, *m, *v, *po, *mo, *vo;
    uint16_t* lowp;
    sof_optim_result* res;
    for (float** b : {&p, &g, &m, &v, &po, &mo, &vo}) {
        ok(cudaMalloc(b, b4), "cudaMalloc");
        ok(cudaMemset(*b, 0, b4), "memset");
    }
    ok(cudaMalloc(&lowp, size_t(n) * 2), "cudaMalloc");
    ok(cudaMalloc(&res, sizeof(*res)), "cudaMalloc");
    cudaStream_t st;
    ok(cudaStreamCreate(&st), "stream");
    cudaEvent_t e0, e1;
    ok(cudaEventCreate(&e0), "event");
    ok(cudaEventCreate(&e1), "event");

    sof_optim_hparams hp{};
    hp.struct_size = sizeof(hp);
    hp.lr = 1e-3f, hp.beta1 = 0.9f, hp.beta2 = 0.999f, hp.eps = 1e-8f, hp.weight_decay = 0.1f;
    hp.step = 10, hp.mode = SOF_ADAM_ADAMW, hp.bias_correction = 1, hp.grad_scale = 1.0f;

    std::printf("device: %s, params: %lld, iterations: %d, bf16 copy written (30 B/param)\n",
                prop.name, static_cast<long long>(n), iters);
    for (int separate = 0; separate < 2; separate++) {
        float* pout = separate ? po : p;
        float* mout = separate ? mo : m;
        float* vout = separate ? vo : v;
        sof_optim_slice s{};
        s.struct_size = sizeof(sof_optim_slice);
        s.param_dtype = SOF_DTYPE_F32;
        s.n = n;
        s.param = p, s.param_out = pout;
        s.grad = g, s.grad_dtype = SOF_DTYPE_F32;
        s.lowp_dtype = SOF_DTYPE_BF16, s.lowp_out = lowp;
        s.num_slots = 2;
        s.slot[0].format = s.slot[1].format = SOF_STATE_F32;
        s.slot[0].data = m, s.slot[0].data_out = mout;
        s.slot[1].data = v, s.slot[1].data_out = vout;
        auto time_it = [&](auto&& fn) {
            fn();
            ok(cudaStreamSynchronize(st), "warmup");
            ok(cudaEventRecord(e0, st), "record");
            for (int i = 0; i < iters; i++)
                fn();
            ok(cudaEventRecord(e1, st), "record");
            ok(cudaEventSynchronize(e1), "sync");
            float ms = 0;
            ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
            return ms / 1e3 / iters;
        };
        int blocks = prop.multiProcessorCount * 8;
        double t_ceil = time_it([&] {
            ceiling_kernel<<<blocks, 256, 0, st>>>(
                reinterpret_cast<const float4*>(p), reinterpret_cast<const float4*>(g),
                reinterpret_cast<const float4*>(m), reinterpret_cast<const float4*>(v),
                reinterpret_cast<float4*>(pout), reinterpret_cast<float4*>(mout),
                reinterpret_cast<float4*>(vout), reinterpret_cast<uint2*>(lowp), n / 4);
        });
        double t_adam = time_it([&] {
            if (api->step(ctx, &s, &hp, res, st) != SOF_OK) {
                std::fprintf(stderr, "adam_step: %s\n", api->last_error(ctx));
                std::exit(1);
            }
        });
        const char* mode = separate ? "separate" : "in-place";
        double bytes = 30.0 * double(n);
        std::printf("%-8s ceiling : %8.2f Gparam/s %8.1f GB/s\n", mode, n / t_ceil / 1e9,
                    bytes / t_ceil / 1e9);
        std::printf("%-8s gpu_adam: %8.2f Gparam/s %8.1f GB/s  fraction_of_ceiling %.3f\n", mode,
                    n / t_adam / 1e9, bytes / t_adam / 1e9, t_ceil / t_adam);
    }
    api->destroy(ctx);
    return 0;
}
