// Device factory, small helpers and the device ops that run kernels through launch(): picks the
// host or CUDA device from the deck's device section (CUDA device: linked only in CUDA builds).
#include "device/device.h"

#include "config/config.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "device/host_device.h"
#include "kernels/cast.h"
#include "kernels/grad_stats.h"

#if defined(SOF_HAVE_CUDA) && __has_include("device/cuda_device.h")
#include "device/cuda_device.h"
#define SOF_DEVICE_HAVE_CUDA_IMPL 1
#endif

namespace sof::device {

size_t host_capacity_bytes(double memory_gb) {
    if (memory_gb <= 0.0) return size_t(8) << 30;
    return static_cast<size_t>(memory_gb * double(size_t(1) << 30));
}

std::string format_bytes(double b) {
    if (b >= double(1ull << 30)) return core::strfmt("%.2f GiB", b / double(1ull << 30));
    if (b >= double(1ull << 20)) return core::strfmt("%.2f MiB", b / double(1ull << 20));
    if (b >= 1024.0) return core::strfmt("%.2f KiB", b / 1024.0);
    return core::strfmt("%.0f B", b);
}

void Device::grad_prep(const float* grad, size_t n, std::vector<int64_t> bounds, float scale,
                       GradStats* stats, uint16_t* bf16_out, Stream& s) {
    kernels::check_piece_bounds(bounds, n); // here, not later on the stream
    launch(s, core::strfmt("grad prep %s", format_bytes(4.0 * static_cast<double>(n)).c_str()),
           [grad, n, bounds = std::move(bounds), scale, stats, bf16_out](const kernels::Exec& ex) {
               kernels::grad_prep(ex, grad, n, bounds, scale, stats, bf16_out);
           });
}

void Device::grad_prep_pieces(const float* grad, const int64_t* bounds, int64_t npieces,
                              int64_t base, float scale, GradStats* stats, uint16_t* bf16_out,
                              Stream& s) {
    SOF_CHECK(npieces >= 0, "grad_prep_pieces: npieces = %lld", static_cast<long long>(npieces));
    launch(s, "grad prep (device bounds)", [=](const kernels::Exec& ex) {
        kernels::grad_prep_pieces(ex, grad, bounds, npieces, base, scale, stats, bf16_out);
    });
}

void Device::cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n, Stream& s) {
    launch(s, "cast fp32->bf16",
           [src, dst, n](const kernels::Exec& ex) { kernels::cast_f32_to_bf16(ex, src, dst, n); });
}

void Device::cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n, Stream& s) {
    launch(s, "cast bf16->fp32",
           [src, dst, n](const kernels::Exec& ex) { kernels::cast_bf16_to_f32(ex, src, dst, n); });
}

void Device::sum_chunks(const float* chunks, int nchunks, size_t n, float* out, Stream& s) {
    launch(s, "sum chunks", [chunks, nchunks, n, out](const kernels::Exec& ex) {
        kernels::sum_chunks(ex, chunks, nchunks, n, out);
    });
}

std::unique_ptr<kernels::Scratch> make_scratch(Device& d, Stream& s, const std::string& what) {
    kernels::Scratch::Memory mem;
    mem.alloc = [&d, what](size_t bytes) { return d.alloc(bytes, what); };
    mem.free = [&d](void* p) { d.free(p); };
    mem.drain = [&d, &s] { d.synchronize(s); };
    return std::make_unique<kernels::Scratch>(std::move(mem), what);
}

std::string device_type_problem(const config::DeviceConfig& cfg) {
#ifdef SOF_DEVICE_HAVE_CUDA_IMPL
    (void)cfg;
    return "";
#else
    return cfg.type == config::DeviceType::Cuda
               ? "device.type: cuda, but this build has no CUDA support (configure with "
                 "-DSOF_CUDA=ON on a machine with the CUDA toolkit, or set device.type: host)"
               : "";
#endif
}

std::unique_ptr<Device> make_device(const config::DeviceConfig& cfg, int local_rank,
                                    core::Trace* trace) {
    if (cfg.memory_gb < 0.0)
        SOF_FAIL(Config, "device.memory_gb = %g must be >= 0 (0 = 8 GiB for the host device)",
                 cfg.memory_gb);
    switch (cfg.type) {
    case config::DeviceType::Host:
        return std::make_unique<HostDevice>(host_capacity_bytes(cfg.memory_gb), trace);
    case config::DeviceType::Cuda:
#ifdef SOF_DEVICE_HAVE_CUDA_IMPL
        return make_cuda_device(cfg, local_rank, trace);
#else
        (void)local_rank;
        core::throw_error(core::ErrorKind::Config, device_type_problem(cfg));
#endif
    case config::DeviceType::Auto:
#ifdef SOF_DEVICE_HAVE_CUDA_IMPL
        if (cuda_device_count() > 0) return make_cuda_device(cfg, local_rank, trace);
#endif
        (void)local_rank;
        return std::make_unique<HostDevice>(host_capacity_bytes(cfg.memory_gb), trace);
    }
    SOF_FAIL(Internal, "unknown device.type");
}

} // namespace sof::device
