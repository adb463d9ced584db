// The op driver's harness and main(): the case registry, data and error helpers, the GPU context,
// and the --gpu mode (GPU cases only; exit 77 without a GPU) and --report (errors per check).
#include "harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "case_names.h" // each case named in the log before it runs (the GPU cases above all)
#include "config/config.h"

#if defined(SOF_HAVE_CUDA)
#include "device/cuda_device.h"
#endif

namespace sof::ktest {

namespace {

std::map<std::string, std::set<Part>>& registry() {
    static std::map<std::string, std::set<Part>> r;
    return r;
}

// One line per check for --report: what, the normalized error, the threshold.
struct Record {
    std::string what;
    double err, tol;
};
std::vector<Record>& records() {
    static std::vector<Record> r;
    return r;
}

std::unique_ptr<Gpu>& gpu_slot() {
    static std::unique_ptr<Gpu> g;
    return g;
}

double max_abs(const std::vector<double>& v) {
    double m = 0.0;
    for (double x : v)
        m = std::max(m, std::fabs(x));
    return m;
}

} // namespace

bool register_case(const char* op, Part part) {
    registry()[op].insert(part);
    return true;
}

const std::map<std::string, std::set<Part>>& registered() {
    return registry();
}

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = scale * d(gen);
    return v;
}

std::vector<int> randint(size_t n, uint32_t seed, int lo, int hi) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int> v(n);
    for (int& x : v)
        x = d(gen);
    return v;
}

std::vector<double> to_double(const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
}

template <> std::vector<float> representable<float>(const std::vector<float>& v) {
    return v;
}
template <> std::vector<float> representable<core::bf16>(const std::vector<float>& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++)
        r[i] = core::round_bf16(v[i]);
    return r;
}

double normalized_error(const std::vector<float>& got, const std::vector<double>& ref) {
    REQUIRE(got.size() == ref.size());
    double diff = 0.0;
    for (size_t i = 0; i < got.size(); i++) {
        const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
        if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
        diff = std::max(diff, d);
    }
    const double scale = max_abs(ref);
    if (diff == 0.0) return 0.0;
    return scale > 0.0 ? diff / scale : std::numeric_limits<double>::infinity();
}

void check_ref(const std::string& what, const std::vector<float>& got,
               const std::vector<double>& ref, double tol) {
    const double e = normalized_error(got, ref);
    records().push_back({what, e, tol});
    INFO(what << ": normalized error " << e << ", threshold " << tol);
    CHECK(e <= tol);
    if (got.empty()) return;
    // the check can fail: one element off by 4 x tol x max|ref| must be caught
    std::vector<float> bad = got;
    const size_t k = (got.size() * 7) / 13;
    const double scale = max_abs(ref) > 0.0 ? max_abs(ref) : 1.0;
    bad[k] = static_cast<float>(bad[k] + 4.0 * tol * scale + 1e-30);
    CHECK_MESSAGE(normalized_error(bad, ref) > tol, what << ": a mutated result was not caught");
}

void check_twin(const std::string& what, const std::vector<float>& gpu,
                const std::vector<float>& cpu, double tol) {
    check_ref(what, gpu, to_double(cpu), tol);
}

void check_bitwise(const std::string& what, const std::vector<float>& a,
                   const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    size_t diff = 0, first = a.size();
    for (size_t i = 0; i < a.size(); i++)
        if (core::f32_bits(a[i]) != core::f32_bits(b[i])) {
            if (diff++ == 0) first = i;
        }
    records().push_back({what + " (bitwise)", static_cast<double>(diff), 0.0});
    INFO(what << ": " << diff << " of " << a.size() << " elements differ (first at " << first
              << ")");
    CHECK(diff == 0);
    if (a.empty()) return;
    std::vector<float> bad = a;
    const size_t k = a.size() / 2;
    bad[k] = core::bits_f32(core::f32_bits(bad[k]) ^ 1u);
    bool caught = false;
    for (size_t i = 0; i < a.size(); i++)
        caught |= core::f32_bits(bad[i]) != core::f32_bits(b[i]);
    CHECK_MESSAGE(caught, what << ": a flipped bit was not caught");
}

void check_close(const std::string& what, const std::vector<double>& a,
                 const std::vector<double>& b, double tol) {
    REQUIRE(a.size() == b.size());
    double diff = 0.0;
    for (size_t i = 0; i < a.size(); i++)
        diff = std::max(diff, std::fabs(a[i] - b[i]));
    const double scale = max_abs(b) > 0.0 ? max_abs(b) : 1.0;
    records().push_back({what, diff / scale, tol});
    INFO(what << ": max |a - b| / max |b| = " << diff / scale << ", threshold " << tol);
    CHECK(diff / scale <= tol);
}

// ---- GPU ---------------------------------------------------------------------------------------

template <class T> DevBuf<T>::DevBuf(device::Device* d, size_t n) : d_(d), n_(n) {
    p_ = static_cast<T*>(d->alloc(std::max<size_t>(n, 1) * sizeof(T), "test_kernels buffer"));
}
template <class T> DevBuf<T>::~DevBuf() {
    if (p_) d_->free(p_);
}
template class DevBuf<float>;
template class DevBuf<core::bf16>;
template class DevBuf<int>;
template class DevBuf<uint16_t>;
template class DevBuf<kernels::GradStats>;
template class DevBuf<int64_t>;

Gpu::Gpu() {
    config::DeviceConfig cfg;
    cfg.type = config::DeviceType::Cuda;
    cfg.id = 0;
    dev_ = device::make_device(cfg, 0, nullptr);
    stream_ = dev_->create_stream("test_kernels");
    blas_ = kernels::cuda::Blas::create(stream_->native());
    scratch_ = device::make_scratch(*dev_, *stream_, "test_kernels scratch");
}

Gpu::~Gpu() {
    if (dev_) dev_->synchronize();
    scratch_.reset();
    blas_.reset();
    stream_.reset();
    dev_.reset();
}

kernels::Exec Gpu::exec() const {
    kernels::Exec ex;
    ex.backend = kernels::Backend::Cuda;
    ex.stream = stream_->native();
    ex.blas = blas_.get();
    ex.scratch = scratch_.get();
    return ex;
}

void Gpu::sync() {
    dev_->synchronize(*stream_);
}

template <class T> DevBuf<T> Gpu::upload(const std::vector<float>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); i++)
        h[i] = core::from_f32<T>(v[i]);
    DevBuf<T> b(dev_.get(), v.size());
    dev_->copy(b.get(), h.data(), h.size() * sizeof(T), device::CopyKind::HostToDevice, *stream_);
    sync();
    return b;
}

DevBuf<int> Gpu::upload_ids(const std::vector<int>& v) {
    return upload_raw(v);
}

template <class T> std::vector<float> Gpu::download(const T* p, size_t n) {
    std::vector<T> h(n);
    dev_->copy(h.data(), p, n * sizeof(T), device::CopyKind::DeviceToHost, *stream_);
    sync();
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = core::to_f32(h[i]);
    return v;
}

template <class T> std::vector<float> Gpu::download(const DevBuf<T>& b) {
    return download(b.get(), b.size());
}

template DevBuf<float> Gpu::upload<float>(const std::vector<float>&);
template DevBuf<core::bf16> Gpu::upload<core::bf16>(const std::vector<float>&);
template std::vector<float> Gpu::download<float>(const float*, size_t);
template std::vector<float> Gpu::download<core::bf16>(const core::bf16*, size_t);
template std::vector<float> Gpu::download<float>(const DevBuf<float>&);
template std::vector<float> Gpu::download<core::bf16>(const DevBuf<core::bf16>&);

bool gpu_available() {
#if defined(SOF_HAVE_CUDA)
    return device::cuda_device_count() > 0;
#else
    return false;
#endif
}

Gpu* gpu_or_skip() {
    if (!gpu_available()) {
        MESSAGE("no CUDA GPU visible (or a build without CUDA): the CUDA twin was not run");
        return nullptr;
    }
    if (!gpu_slot()) gpu_slot() = std::make_unique<Gpu>();
    return gpu_slot().get();
}

template <> const char* dtype_name<float>() {
    return "fp32";
}
template <> const char* dtype_name<core::bf16>() {
    return "bf16";
}

} // namespace sof::ktest

int main(int argc, char** argv) {
    bool gpu = false, report = false;
    std::vector<const char*> args;
    for (int i = 0; i < argc; i++) {
        if (std::strcmp(argv[i], "--gpu") == 0)
            gpu = true;
        else if (std::strcmp(argv[i], "--report") == 0)
            report = true;
        else
            args.push_back(argv[i]);
    }
    doctest::Context ctx;
    if (gpu) {
        if (!sof::ktest::gpu_available()) {
            std::printf("test_kernels --gpu: no CUDA GPU visible (or a build without CUDA): the "
                        "CUDA twins were not run (skipped)\n");
            return 77;
        }
        ctx.addFilter("test-suite", "gpu");
    }
    ctx.applyCommandLine(static_cast<int>(args.size()), args.data());
    const int rc = ctx.run();
    if (report) {
        std::printf("\n%-90s %12s %10s\n", "check", "error", "threshold");
        for (const auto& r : sof::ktest::records())
            std::printf("%-90s %12.3g %10.3g\n", r.what.c_str(), r.err, r.tol);
    }
    sof::ktest::gpu_slot().reset(); // before the CUDA runtime shuts down
    return rc;
}
