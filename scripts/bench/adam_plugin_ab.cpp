// A/B of two builds of an optimizer plugin (e.g. two SOF_CPU_ADAM_PREFETCH values): both loaded
// through the C ABI in one process, stepping the same 2 MiB THP buffers, order alternating.
// Build: g++ -O2 -fopenmp -Ilib scripts/bench/adam_plugin_ab.cpp -ldl -o /tmp/adam_plugin_ab
// Usage: adam_plugin_ab A.so B.so PARAMS THREADS PAIRS COPY(0|1) SEPARATE(0|1)
// Prints the median over pairs of t_A / t_B (> 1: B faster), AdamW wd 0.1, step 1000, fp32 grads.
#include <dlfcn.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "optim/sof_optim_abi.h"

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void* alloc(size_t bytes) {
    size_t sz = (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    void* p = std::aligned_alloc(2u << 20, sz);
    if (!p) {
        std::fprintf(stderr, "adam_plugin_ab: cannot allocate %zu bytes\n", sz);
        std::exit(2);
    }
    madvise(p, sz, MADV_HUGEPAGE);
    return p;
}

struct Loaded {
    const sof_optim_plugin* pl = nullptr;
    sof_optim_ctx* ctx = nullptr;
};

Loaded load(const char* so, int threads) {
    void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    auto get = h ? reinterpret_cast<const sof_optim_plugin* (*)(void)>(dlsym(h, SOF_OPTIM_ENTRY))
                 : nullptr;
    Loaded x;
    x.pl = get ? get() : nullptr;
    sof_optim_init init{sizeof(sof_optim_init), threads, 0};
    if (!x.pl || x.pl->abi_version != SOF_OPTIM_ABI_VERSION || x.pl->create(&init, &x.ctx)) {
        std::fprintf(stderr, "adam_plugin_ab: %s is not a usable optimizer plugin here\n", so);
        std::exit(2);
    }
    return x;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 8) {
        std::fprintf(stderr,
                     "usage: adam_plugin_ab A.so B.so PARAMS THREADS PAIRS COPY SEPARATE\n");
        return 2;
    }
    int64_t n = std::atoll(argv[3]);
    int threads = std::atoi(argv[4]), pairs = std::atoi(argv[5]);
    bool copy = std::atoi(argv[6]) != 0, separate = std::atoi(argv[7]) != 0;
    if (n <= 0 || threads < 1 || pairs < 1) {
        std::fprintf(stderr, "adam_plugin_ab: PARAMS, THREADS and PAIRS must be >= 1\n");
        return 2;
    }
    Loaded a = load(argv[1], threads), b = load(argv[2], threads);
    auto* p = static_cast<float*>(alloc(4 * n));
    auto* g = static_cast<float*>(alloc(4 * n));
    auto* m = static_cast<float*>(alloc(4 * n));
    auto* v = static_cast<float*>(alloc(4 * n));
    auto* po = static_cast<float*>(alloc(4 * n));
    auto* mo = static_cast<float*>(alloc(4 * n));
    auto* vo = static_cast<float*>(alloc(4 * n));
    auto* l = static_cast<uint16_t*>(alloc(2 * n));
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        p[i] = static_cast<float>(i % 1021) * 1e-4f - 0.05f;
        g[i] = 1e-6f * static_cast<float>(i % 17) - 8e-6f;
        m[i] = po[i] = mo[i] = vo[i] = 0.0f;
        v[i] = 1e-9f;
        l[i] = 0;
    }
    sof_optim_slice s{};
    s.struct_size = sizeof s;
    s.n = n;
    s.param = p;
    s.grad = g;
    s.grad_dtype = SOF_DTYPE_F32;
    s.lowp_dtype = SOF_DTYPE_BF16;
    s.exp_avg = m;
    s.exp_avg_sq = v;
    s.param_out = separate ? po : p;
    s.slot[0].data_out = separate ? mo : m;
    s.slot[1].data_out = separate ? vo : v;
    s.lowp_out = copy ? l : nullptr;
    sof_optim_hparams hp{sizeof hp, 1e-4f, 0.9f,           0.999f, 1e-8f,
                         0.1f,      1000,  SOF_ADAM_ADAMW, 1,      1.0f};
    auto run = [&](Loaded& x) {
        sof_optim_result r{};
        double t = now();
        if (x.pl->step(x.ctx, &s, &hp, &r, nullptr) != SOF_OK) {
            std::fprintf(stderr, "adam_plugin_ab: adam_step: %s\n", x.pl->last_error(x.ctx));
            std::exit(2);
        }
        return now() - t;
    };
    run(a); // warm-up
    run(b);
    std::vector<double> ratio;
    for (int k = 0; k < pairs; k++) {
        double ta, tb;
        if (k % 2) {
            ta = run(a);
            tb = run(b);
        } else {
            tb = run(b);
            ta = run(a);
        }
        ratio.push_back(ta / tb);
    }
    std::sort(ratio.begin(), ratio.end());
    std::printf("B speed / A speed: median %.3f (min %.3f max %.3f), %d pairs\n",
                ratio[ratio.size() / 2], ratio.front(), ratio.back(), pairs);
    return 0;
}
