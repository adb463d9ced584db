// Side-by-side driver: DeepSpeed's CPU-Adam kernel (Adam_Optimizer::Step_AVX<8>, built from a
// DeepSpeed checkout given at build time) against a superoffload optimizer plugin, same buffers.
// Not part of the project build: scripts/bench/ds_adam_compare.sh compiles it outside the tree
// against DeepSpeed's csrc/includes with a stub torch/extension.h (the kernel needs no torch).
// Usage: ds_adam_compare PLUGIN.so PARAMS THREADS PAIRS
// In place, fp32 grads, no low-precision copy (what DeepSpeed's kernel does), AdamW wd 0.1.
// Each pair times one DeepSpeed step and one plugin step on the same buffers, order alternating
// from pair to pair; prints every pair and the median of t_ds / t_plugin (> 1: plugin faster).
#include <dlfcn.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cpu_adam.h" // DeepSpeed's, from DS_ROOT/csrc/includes
#include "optim/sof_optim_abi.h"

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

float* alloc_f32(size_t n) {
    size_t sz = (n * 4 + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    void* p = std::aligned_alloc(2u << 20, sz); // as superoffload bench adam: 2 MiB, THP
    if (!p) {
        std::fprintf(stderr, "ds_adam_compare: cannot allocate %zu bytes\n", sz);
        std::exit(2);
    }
    madvise(p, sz, MADV_HUGEPAGE);
    return static_cast<float*>(p);
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    size_t k = x.size();
    return k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: ds_adam_compare PLUGIN.so PARAMS THREADS PAIRS\n");
        return 2;
    }
    const char* so = argv[1];
    int64_t n = std::atoll(argv[2]);
    int threads = std::atoi(argv[3]), pairs = std::atoi(argv[4]);
    if (n <= 0 || n % 128 || threads < 1 || pairs < 1) {
        std::fprintf(stderr, "ds_adam_compare: PARAMS must be a positive multiple of 128 "
                             "(DeepSpeed's vector body), THREADS and PAIRS >= 1\n");
        return 2;
    }
    omp_set_num_threads(threads);

    void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::fprintf(stderr, "ds_adam_compare: %s\n", dlerror());
        return 2;
    }
    auto get = reinterpret_cast<const sof_optim_plugin* (*)(void)>(dlsym(h, SOF_OPTIM_ENTRY));
    const sof_optim_plugin* pl = get ? get() : nullptr;
    if (!pl || pl->abi_version != SOF_OPTIM_ABI_VERSION || pl->score() <= 0) {
        std::fprintf(stderr, "ds_adam_compare: %s is not a usable optimizer plugin here\n", so);
        return 2;
    }
    sof_optim_init init{sizeof(sof_optim_init), threads, 0};
    sof_optim_ctx* ctx = nullptr;
    if (pl->create(&init, &ctx) != SOF_OK) {
        std::fprintf(stderr, "ds_adam_compare: create: %s\n", pl->last_error(nullptr));
        return 2;
    }

    float *p = alloc_f32(n), *g = alloc_f32(n), *m = alloc_f32(n), *v = alloc_f32(n);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) { // first touch by the measuring threads
        p[i] = static_cast<float>(i % 1021) * 1e-4f - 0.05f;
        g[i] = 1e-6f * static_cast<float>(i % 17) - 8e-6f;
        m[i] = 0.0f;
        v[i] = 1e-9f;
    }

    const float lr = 1e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
    const int64_t step = 1000;
    Adam_Optimizer ds(lr, b1, b2, eps, wd, true);
    ds.IncrementStep(step, b1, b2);
    ds.update_state(lr, eps, wd, true);
    auto run_ds = [&] {
        double t = now();
        size_t rounded = 0;
        ds.Step_AVX<8>(&rounded, p, g, m, v, static_cast<size_t>(n));
        return now() - t;
    };
    sof_optim_slice s{};
    s.struct_size = sizeof s;
    s.n = n;
    s.param = p;
    s.grad = g;
    s.grad_dtype = SOF_DTYPE_F32;
    s.lowp_dtype = SOF_DTYPE_BF16;
    s.exp_avg = m;
    s.exp_avg_sq = v;
    s.param_out = p;
    s.slot[0].data_out = m;
    s.slot[1].data_out = v;
    sof_optim_hparams hp{sizeof hp, lr, b1, b2, eps, wd, step, SOF_ADAM_ADAMW, 1, 1.0f};
    auto run_pl = [&] {
        sof_optim_result r{};
        double t = now();
        if (pl->step(ctx, &s, &hp, &r, nullptr) != SOF_OK) {
            std::fprintf(stderr, "ds_adam_compare: adam_step: %s\n", pl->last_error(ctx));
            std::exit(2);
        }
        return now() - t;
    };

    run_ds(); // warm-up of both
    run_pl();
    std::vector<double> ratio, tds, tpl;
    for (int k = 0; k < pairs; k++) {
        double a, b;
        if (k % 2 == 0) {
            a = run_ds();
            b = run_pl();
        } else {
            b = run_pl();
            a = run_ds();
        }
        tds.push_back(a);
        tpl.push_back(b);
        ratio.push_back(a / b);
        std::printf("pair %3d  deepspeed %.4f s  %s %.4f s  ds/plugin %.3f\n", k, a, pl->name, b,
                    a / b);
    }
    double bytes = 28.0 * static_cast<double>(n);
    std::printf("ds_adam_compare: %lld params, %d threads, %d pairs, plugin %s (%s)\n",
                static_cast<long long>(n), threads, pairs, pl->name, pl->variant());
    std::printf("deepspeed median %.4f s (%.2f Gparam/s, %.1f GB/s), best %.4f s\n", median(tds),
                n / median(tds) / 1e9, bytes / median(tds) / 1e9,
                *std::min_element(tds.begin(), tds.end()));
    std::printf("plugin    median %.4f s (%.2f Gparam/s, %.1f GB/s), best %.4f s\n", median(tpl),
                n / median(tpl) / 1e9, bytes / median(tpl) / 1e9,
                *std::min_element(tpl.begin(), tpl.end()));
    std::printf("plugin speed / deepspeed speed: median of pairs %.3f (min %.3f, max %.3f)\n",
                median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
    pl->destroy(ctx);
    return 0;
}
