// `superoffload bench moe [--tokens N] [--hidden H] [--inter I] [--experts E] [--topk K]
// [--threads T] [--reps R] [--gpu 1]`: the experts' grouped product (kernels/grouped_matmul.h) on
// a routed batch beside ONE dense matrix product of the same FLOPs, forward and backward, paired.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "config/config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "device/device.h"
#include "kernels/blas.h"
#include "kernels/grouped_matmul.h"
#include "kernels/matmul.h"
#include "kernels/moe_dispatch.h"
#include "kernels/moe_router.h"

namespace sof::app {

namespace {

using Clock = std::chrono::steady_clock;

// Defaults: a Qwen3-MoE-like layer scaled to a 2-core CPU (Qwen3-30B-A3B: H 2048, I 768, E 128,
// K 8); the gate_up projection (C = H, OC = 2 I) is the product timed.
struct Opts {
    int N = 512, H = 1024, I = 384, E = 64, K = 8, threads = 2, reps = 3;
    bool gpu = false;
};

Opts parse(int argc, char** argv) {
    const char* usage = "usage: superoffload bench moe [--tokens N] [--hidden H] [--inter I] "
                        "[--experts E] [--topk K] [--threads T] [--reps R] [--gpu 1]";
    Opts o;
    CliParser p({usage, "bench moe: unknown option '%s'",
                 [](const std::string& opt) { return "bench moe: " + opt + " needs a value"; }});
    int gpu = 0;
    const std::vector<std::pair<const char*, int*>> ints = {
        {"--tokens", &o.N}, {"--hidden", &o.H},  {"--inter", &o.I}, {"--experts", &o.E},
        {"--topk", &o.K},   {"--reps", &o.reps}, {"--gpu", &gpu},   {"--threads", &o.threads}};
    std::vector<std::string> text(ints.size());
    for (size_t i = 0; i < ints.size(); i++)
        p.option(ints[i].first, &text[i]);
    const std::vector<std::string> extra = p.parse(argc - 1, argv + 1); // argv[0] is "moe"
    if (!extra.empty()) p.fail("bench moe: unknown option '" + extra[0] + "'");
    for (size_t i = 0; i < ints.size(); i++) {
        if (!p.count(ints[i].first)) continue;
        const std::string& v = text[i];
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 0 || n > 10000000)
            p.fail(core::strfmt("bench moe: %s '%s' must be an integer in [0, 10000000]",
                                ints[i].first, v.c_str()));
        *ints[i].second = static_cast<int>(n);
    }
    o.gpu = gpu != 0;
    if (o.N < 1 || o.H < 1 || o.I < 1 || o.reps < 1 || o.threads < 1)
        p.fail("bench moe: --tokens, --hidden, --inter, --reps and --threads must be positive");
    if (o.E < 1 || o.E > kernels::kMaxExperts || o.K < 1 || o.K > o.E || o.K > kernels::kMaxTopK)
        p.fail(core::strfmt("bench moe: --experts %d --topk %d; experts 1..%d, top-k 1..min(E, %d)",
                            o.E, o.K, kernels::kMaxExperts, kernels::kMaxTopK));
    return o;
}

std::vector<float> randu(size_t n, unsigned seed, float scale) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v)
        x = u(gen);
    return v;
}

// The routing of N random tokens (softmax top-k of random logits): the plan's offsets and the
// rows per expert (min, max).
struct Routing {
    std::vector<int> off;
    int min_rows = 0, max_rows = 0;
};

Routing route(const Opts& o) {
    kernels::RouterArgs a;
    a.N = o.N;
    a.E = o.E;
    a.K = o.K;
    a.renorm = true;
    const std::vector<float> logits = randu(static_cast<size_t>(o.N) * o.E, 7, 2.0f);
    const size_t P = static_cast<size_t>(o.N) * o.K;
    std::vector<int> idx(P), order(P), slot(P);
    std::vector<float> w(P);
    kernels::moe_router_forward(kernels::cpu_exec(), idx.data(), w.data(), logits.data(), a);
    Routing r;
    r.off.resize(static_cast<size_t>(o.E) + 1);
    kernels::moe_plan(kernels::cpu_exec(), order.data(), slot.data(), r.off.data(), r.off.data(),
                      idx.data(), o.N, o.K, o.E);
    r.min_rows = static_cast<int>(P);
    for (int e = 0; e < o.E; e++) {
        const int n = r.off[static_cast<size_t>(e) + 1] - r.off[static_cast<size_t>(e)];
        r.min_rows = std::min(r.min_rows, n);
        r.max_rows = std::max(r.max_rows, n);
    }
    return r;
}

struct Timing {
    double fwd = 1e30, bwd = 1e30; // best (CPU) or median (GPU) seconds
};

void print(const Opts& o, const Routing& r, const char* where, const char* stat, Timing g,
           Timing d) {
    const double P = static_cast<double>(o.N) * o.K, C = o.H, OC = 2.0 * o.I;
    const double fwd = 2.0 * P * C * OC, bwd = 2.0 * fwd;
    std::printf("bench moe (%s): %d tokens x top-%d of %d experts = %.0f rows (%d..%d per expert), "
                "gate_up product C=%d -> OC=%d, %s of %d; the dense yardstick is one matmul of "
                "the same rows and FLOPs\n",
                where, o.N, o.K, o.E, P, r.min_rows, r.max_rows, o.H, 2 * o.I, stat, o.reps);
    std::printf("  %-34s %10s %10s %10s %10s\n", "", "fwd ms", "fwd GF/s", "bwd ms", "bwd GF/s");
    auto row = [&](const char* name, Timing t) {
        std::printf("  %-34s %10.2f %10.1f %10.2f %10.1f\n", name, t.fwd * 1e3, fwd / t.fwd / 1e9,
                    t.bwd * 1e3, bwd / t.bwd / 1e9);
    };
    row("grouped (kernels::grouped_matmul)", g);
    row("dense (kernels::matmul, one product)", d);
    std::printf("  grouped / dense throughput: forward %.2f, backward %.2f (backward = dX + dW)\n",
                d.fwd / g.fwd, d.bwd / g.bwd);
}

int bench_cpu(const Opts& o) {
    omp_set_num_threads(o.threads);
    kernels::cpu::use_single_threaded_blas();
    const Routing r = route(o);
    const size_t P = static_cast<size_t>(o.N) * o.K, C = o.H, OC = 2 * static_cast<size_t>(o.I);
    const std::vector<float> x = randu(P * C, 1, 1.0f), dout = randu(P * OC, 2, 1.0f);
    const std::vector<float> w = randu(static_cast<size_t>(o.E) * OC * C, 3, 0.05f);
    std::vector<float> y(P * OC), dx(P * C), dw(w.size(), 0.0f);
    kernels::GroupedShape s;
    s.E = o.E;
    s.C = o.H;
    s.OC = 2 * o.I;
    s.offsets = s.host_offsets = r.off.data();
    const auto ex = kernels::cpu_exec();
    const int Pi = static_cast<int>(P);
    auto secs = [](auto&& fn) {
        const Clock::time_point t = Clock::now();
        fn();
        return std::chrono::duration<double>(Clock::now() - t).count();
    };
    Timing g, d;
    // alternate the two, so a load on the machine hits both alike; the dense product uses the
    // first expert's weights (the same bytes per row)
    for (int rep = 0; rep < o.reps; rep++) {
        g.fwd = std::min(g.fwd, secs([&] {
                             kernels::grouped_matmul_forward(ex, y.data(), x.data(), w.data(),
                                                             static_cast<const float*>(nullptr), s);
                         }));
        d.fwd = std::min(d.fwd, secs([&] {
                             kernels::matmul_forward(
                                 ex, y.data(), static_cast<float*>(nullptr), x.data(), w.data(),
                                 static_cast<const float*>(nullptr), Pi, o.H, 2 * o.I);
                         }));
        g.bwd = std::min(g.bwd, secs([&] {
                             kernels::grouped_matmul_backward(ex, dx.data(), dw.data(),
                                                              static_cast<float*>(nullptr),
                                                              dout.data(), x.data(), w.data(), s);
                         }));
        d.bwd = std::min(d.bwd, secs([&] {
                             kernels::matmul_backward(ex, dx.data(), dw.data(), dout.data(),
                                                      x.data(), w.data(), Pi, o.H, 2 * o.I);
                         }));
    }
    print(o, r, core::strfmt("CPU, fp32, %d threads", o.threads).c_str(), "best", g, d);
    return 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// A device buffer of n elements of T, filled from host values.
template <class T> struct DevVec {
    device::Device* d;
    T* p;
    DevVec(device::Device* dev, size_t n)
        : d(dev), p(static_cast<T*>(dev->alloc(n * sizeof(T), "bench moe"))) {}
    ~DevVec() { d->free(p); }
    DevVec(const DevVec&) = delete;
    DevVec& operator=(const DevVec&) = delete;
};

template <class T>
void upload(device::Device& dev, device::Stream& st, T* dst, const std::vector<T>& v) {
    dev.copy(dst, v.data(), v.size() * sizeof(T), device::CopyKind::HostToDevice, st);
}

std::vector<core::bf16> to_bf16(const std::vector<float>& v) {
    std::vector<core::bf16> b(v.size());
    for (size_t i = 0; i < v.size(); i++)
        b[i] = core::to_bf16(v[i]);
    return b;
}

int bench_gpu(const Opts& o) {
    config::DeviceConfig dc;
    dc.type = config::DeviceType::Cuda;
    const std::unique_ptr<device::Device> dev = device::make_device(dc, 0, nullptr);
    const std::unique_ptr<device::Stream> stream = dev->create_stream("bench-moe");
    const std::unique_ptr<kernels::cuda::Blas> blas = kernels::cuda::Blas::create(stream->native());
    kernels::Exec ex;
    ex.backend = kernels::Backend::Cuda;
    ex.stream = stream->native();
    ex.blas = blas.get();
    const Routing r = route(o);
    const size_t P = static_cast<size_t>(o.N) * o.K, C = o.H, OC = 2 * static_cast<size_t>(o.I);
    using bf = core::bf16;
    DevVec<bf> x(dev.get(), P * C), dout(dev.get(), P * OC), w(dev.get(), o.E * OC * C);
    DevVec<bf> y(dev.get(), P * OC), dx(dev.get(), P * C);
    DevVec<float> dw(dev.get(), o.E * OC * C);
    DevVec<int> off(dev.get(), r.off.size());
    const std::vector<bf> hx = to_bf16(randu(P * C, 1, 1.0f)), hd = to_bf16(randu(P * OC, 2, 1.0f));
    const std::vector<bf> hw = to_bf16(randu(static_cast<size_t>(o.E) * OC * C, 3, 0.05f));
    const std::vector<float> hdw(static_cast<size_t>(o.E) * OC * C, 0.0f);
    upload(*dev, *stream, x.p, hx);
    upload(*dev, *stream, dout.p, hd);
    upload(*dev, *stream, w.p, hw);
    upload(*dev, *stream, off.p, r.off);
    upload(*dev, *stream, dw.p, hdw);
    dev->synchronize(*stream); // the host vectors stay alive until the copies are done
    kernels::GroupedShape s;
    s.E = o.E;
    s.C = o.H;
    s.OC = 2 * o.I;
    s.offsets = off.p;
    s.host_offsets = r.off.data();
    const int Pi = static_cast<int>(P);
    std::unique_ptr<device::Event> ev0 = dev->create_timing_event(),
                                   ev1 = dev->create_timing_event();
    auto timed = [&](auto&& fn) { // device seconds between events on the stream
        dev->record(*ev0, *stream);
        fn();
        dev->record(*ev1, *stream);
        dev->synchronize(*stream);
        return dev->elapsed_ms(*ev0, *ev1) * 1e-3;
    };
    auto gf = [&] { kernels::grouped_matmul_forward<bf>(ex, y.p, x.p, w.p, nullptr, s); };
    auto df = [&] {
        kernels::matmul_forward<bf>(ex, y.p, nullptr, x.p, w.p, nullptr, Pi, o.H, 2 * o.I);
    };
    auto gb = [&] {
        kernels::grouped_matmul_backward<bf>(ex, dx.p, dw.p, nullptr, dout.p, x.p, w.p, s);
    };
    auto db = [&] {
        kernels::matmul_backward<bf>(ex, dx.p, dw.p, dout.p, x.p, w.p, Pi, o.H, 2 * o.I);
    };
    for (int i = 0; i < 2; i++) { // warm-up: handles, heuristics, module load
        gf();
        df();
        gb();
        db();
    }
    std::vector<double> t[4];
    for (int rep = 0; rep < o.reps; rep++) {
        t[0].push_back(timed(gf));
        t[1].push_back(timed(df));
        t[2].push_back(timed(gb));
        t[3].push_back(timed(db));
    }
    const Timing g{median(t[0]), median(t[2])}, d{median(t[1]), median(t[3])};
    print(o, r, (dev->describe() + ", bf16 in, fp32 accumulate").c_str(), "median", g, d);
    return 0;
}

} // namespace

int cmd_bench_moe(int argc, char** argv) {
    const Opts o = parse(argc, argv);
    return o.gpu ? bench_gpu(o) : bench_cpu(o);
}

} // namespace sof::app
