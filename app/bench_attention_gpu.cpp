// `superoffload bench attention --gpu 1 ...`: the two CUDA attention kernels (tensor cores and
// CUDA cores, bf16, causal) timed forward and backward on one GPU, TFLOPS of the causal work.
#include "bench_attention_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "config/config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "kernels/attention.h"

namespace sof::app {

namespace {

// A device buffer freed with the object.
struct Buf {
    device::Device* d;
    void* p;
    Buf(device::Device* dev, size_t bytes, const char* what) : d(dev), p(dev->alloc(bytes, what)) {}
    ~Buf() { d->free(p); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    template <class T> T* as() const { return static_cast<T*>(p); }
};

std::vector<core::bf16> random_bf16(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<core::bf16> v(n);
    for (core::bf16& x : v)
        x = core::to_bf16(u(gen));
    return v;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// max |a - b| / max |b| over two bf16 buffers
double norm_diff(const std::vector<core::bf16>& a, const std::vector<core::bf16>& b) {
    double e = 0, m = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const double x = core::to_f32(a[i]), y = core::to_f32(b[i]);
        e = std::max(e, std::fabs(x - y));
        m = std::max(m, std::fabs(y));
    }
    return e / std::max(m, 1e-30);
}

} // namespace

int bench_attention_gpu(const GpuAttnOpts& o) {
    if (o.NKV <= 0 || o.NH % o.NKV != 0)
        SOF_FAIL(Usage, "bench attention --gpu: --heads %d is not a multiple of --kv-heads %d",
                 o.NH, o.NKV);
    config::DeviceConfig dc;
    dc.type = config::DeviceType::Cuda;
    const std::unique_ptr<device::Device> dev = device::make_device(dc, 0, nullptr);
    const std::unique_ptr<device::Stream> stream = dev->create_stream("bench-attention");
    kernels::Exec ex;
    ex.backend = kernels::Backend::Cuda;
    ex.stream = stream->native();

    const size_t rows = static_cast<size_t>(o.B) * o.T, hd = static_cast<size_t>(o.hd);
    const size_t W = (static_cast<size_t>(o.NH) + 2 * o.NKV) * hd, ldo = o.NH * hd;
    const size_t stats = rows * o.NH;
    const std::vector<core::bf16> h_qkv = random_bf16(rows * W, 1),
                                  h_dout = random_bf16(rows * ldo, 2);
    Buf qkv(dev.get(), rows * W * 2, "bench qkv"), dout(dev.get(), rows * ldo * 2, "bench dout");
    Buf out(dev.get(), rows * ldo * 2, "bench out"), dqkv(dev.get(), rows * W * 2, "bench dqkv");
    Buf lse(dev.get(), stats * 4, "bench lse"), delta(dev.get(), stats * 4, "bench delta");
    dev->copy(qkv.p, h_qkv.data(), rows * W * 2, device::CopyKind::HostToDevice, *stream);
    dev->copy(dout.p, h_dout.data(), rows * ldo * 2, device::CopyKind::HostToDevice, *stream);

    kernels::AttnArgs<core::bf16> a{qkv.as<core::bf16>(),
                                    qkv.as<core::bf16>() + o.NH * hd,
                                    qkv.as<core::bf16>() + (o.NH + o.NKV) * hd,
                                    W,
                                    W,
                                    W,
                                    ldo,
                                    o.B,
                                    o.T,
                                    o.NH,
                                    o.NKV,
                                    o.hd,
                                    nullptr,
                                    0};
    a.window = o.window;
    core::bf16* g = dqkv.as<core::bf16>();
    const kernels::AttnGrads<core::bf16> d{g, g + o.NH * hd, g + (o.NH + o.NKV) * hd, W, W, W};
    auto fwd = [&] { kernels::attention_forward(ex, out.as<core::bf16>(), lse.as<float>(), a); };
    auto bwd = [&] {
        kernels::attention_backward(ex, d, dout.as<core::bf16>(), out.as<core::bf16>(),
                                    lse.as<float>(), delta.as<float>(), a);
    };
    // device time between timing events on the compute stream (cudaEventElapsedTime): the
    // kernels' own time, without the launch latency and the synchronization around them
    std::unique_ptr<device::Event> ev0 = dev->create_timing_event(),
                                   ev1 = dev->create_timing_event();
    auto timed = [&](auto&& fn) { // seconds
        dev->record(*ev0, *stream);
        fn();
        dev->record(*ev1, *stream);
        dev->synchronize(*stream);
        return dev->elapsed_ms(*ev0, *ev1) * 1e-3;
    };

    // causal work: Q K^T and P V over T (T + 1) / 2 pairs per head; the backward is 2.5 x (five
    // products instead of two: dV, dP, dK, dQ and the recomputed S; our dq pass recomputes S and
    // dP again, not counted)
    const double fwd_flops = 4.0 * o.B * o.NH * hd * attention_pairs(o.T, o.window);
    const double bwd_flops = 2.5 * fwd_flops;
    std::printf("bench attention (GPU, %s): B=%d T=%d heads=%d kv_heads=%d hd=%d, bf16, causal, "
                "window %d, median of %d; TFLOPS of the causal work (forward 4 B NH hd x pairs: "
                "T(T+1)/2, with a window W(W+1)/2 + (T-W)W; backward 2.5x)\n",
                dev->describe().c_str(), o.B, o.T, o.NH, o.NKV, o.hd, o.window, o.reps);
    std::printf("  %-22s %10s %12s %10s %12s\n", "kernel", "fwd ms", "fwd TFLOPS", "bwd ms",
                "bwd TFLOPS");
    std::vector<core::bf16> outs[2], grads[2];
    const kernels::AttnKernel kinds[2] = {kernels::AttnKernel::TensorCores,
                                          kernels::AttnKernel::CudaCores};
    const char* names[2] = {"ours, tensor cores", "ours, CUDA cores"};
    for (int k = 0; k < 2; k++) {
        a.kernel = kinds[k];
        if (k == 0 && (o.hd != 64 && o.hd != 128)) {
            std::printf("  %-22s (no tensor-core kernel for hd %d)\n", names[k], o.hd);
            continue;
        }
        for (int i = 0; i < 2; i++) { // warm-up: module load, shared-memory limits
            fwd();
            bwd();
        }
        std::vector<double> tf, tb;
        for (int r = 0; r < o.reps; r++) {
            tf.push_back(timed(fwd));
            tb.push_back(timed(bwd));
        }
        const double mf = median(tf), mb = median(tb);
        std::printf("  %-22s %10.3f %12.1f %10.3f %12.1f\n", names[k], mf * 1e3,
                    fwd_flops / mf / 1e12, mb * 1e3, bwd_flops / mb / 1e12);
        outs[k].resize(rows * ldo);
        grads[k].resize(rows * W);
        dev->copy(outs[k].data(), out.p, rows * ldo * 2, device::CopyKind::DeviceToHost, *stream);
        dev->copy(grads[k].data(), dqkv.p, rows * W * 2, device::CopyKind::DeviceToHost, *stream);
        dev->synchronize(*stream);
    }
    if (!outs[0].empty())
        std::printf("  tensor vs CUDA cores: max normalized difference out %.1e, dq|dk|dv %.1e\n",
                    norm_diff(outs[0], outs[1]), norm_diff(grads[0], grads[1]));
    return 0;
}

} // namespace sof::app
