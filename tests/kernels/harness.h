// The kernel op driver's harness (after ggml's test-backend-ops): a registry of op cases, random
// data, normalized-error checks that prove they can fail, and the GPU context for the CUDA twins.
#pragma once

// Adding the cases of an op X (listed in lib/kernels/ops.h):
//   1. create tests/kernels/op_X.cpp (the folder's CMakeLists.txt globs op_*.cpp) with
//        #include "harness.h"
//        SOF_OP_CPU("X", "what it checks") { ... }  // the CPU twin against a scalar reference in
//                                                    // double written in the test (check_ref)
//        SOF_OP_GPU("X", "what it checks") { ... }  // the CUDA twin in fp32 and bf16 against the
//                                                    // CPU twin (check_twin), thresholds stated
//   2. a SOF_OP_GPU body starts with `Gpu* g = gpu_or_skip(); if (!g) return;`: without a GPU it
//      says so (doctest MESSAGE) and passes; ctest runs the GPU cases as their own entry
//      (test_kernels_gpu: `test_kernels --gpu`, label gpu, skipped with 77 where no GPU is seen).
//   3. cover every shape class: tiny, odd sizes that hit the tails of tiles/warps/blocks, a
//      realistic size, and strided/per-head rows where the op has strides.
// The structure test (test_kernels_structure) fails until every op of kOps has a SOF_OP_CPU and
// a SOF_OP_GPU case, and lib/kernels has X.h, cpu/X.cpp and cuda/X.cu.

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "device/device.h"
#include "kernels/blas.h"
#include "kernels/exec.h"

namespace sof::ktest {

// ---- registry --------------------------------------------------------------------------------
enum class Part { Cpu, Gpu };
// Records that op has cases of this part; returns true (for a namespace-scope initializer).
bool register_case(const char* op, Part part);
// op -> the parts with cases, filled before main() by the SOF_OP_* macros.
const std::map<std::string, std::set<Part>>& registered();

#define SOF_KT_CAT2(a, b) a##b
#define SOF_KT_CAT(a, b) SOF_KT_CAT2(a, b)
#define SOF_OP_CPU(op, title)                                                                      \
    [[maybe_unused]] static const bool SOF_KT_CAT(sof_kt_reg_, __LINE__) =                         \
        ::sof::ktest::register_case(op, ::sof::ktest::Part::Cpu);                                  \
    TEST_CASE(op " (cpu twin): " title* doctest::test_suite("cpu"))
#define SOF_OP_GPU(op, title)                                                                      \
    [[maybe_unused]] static const bool SOF_KT_CAT(sof_kt_reg_, __LINE__) =                         \
        ::sof::ktest::register_case(op, ::sof::ktest::Part::Gpu);                                  \
    TEST_CASE(op " (cuda twin): " title* doctest::test_suite("gpu"))

// ---- data ------------------------------------------------------------------------------------
// n values of scale * N(0, 1) from seed (deterministic).
std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f);
// n ints uniform in [lo, hi] from seed.
std::vector<int> randint(size_t n, uint32_t seed, int lo, int hi);
std::vector<double> to_double(const std::vector<float>& v);

// The values a T tensor can hold: v itself for float, each value rounded to bf16 for bf16. The
// CUDA cases feed these to both twins, so the comparison measures the kernels, not the inputs.
template <class T> std::vector<float> representable(const std::vector<float>& v);

// ---- checks ----------------------------------------------------------------------------------
// max |got - ref| / max |ref| (NaN or Inf anywhere counts as infinite error).
double normalized_error(const std::vector<float>& got, const std::vector<double>& ref);

// CHECKs normalized_error(got, ref) <= tol, and that the same check fails for a copy of got with
// one element moved by 4 * tol * max|ref| (the check can fail). `what` names the output.
void check_ref(const std::string& what, const std::vector<float>& got,
               const std::vector<double>& ref, double tol);
// The CUDA twin's output against the CPU twin's, the same way.
void check_twin(const std::string& what, const std::vector<float>& gpu,
                const std::vector<float>& cpu, double tol);
// CHECKs bitwise equality (reproducible runs; fp32 paths with the same additions in the same
// order), and that one flipped low bit is caught.
void check_bitwise(const std::string& what, const std::vector<float>& a,
                   const std::vector<float>& b);

// Central finite differences of loss at x (step h): the gradient, to check an analytic
// reference backward against its own reference forward.
template <class F> std::vector<double> numeric_grad(F loss, std::vector<double> x, double h) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double x0 = x[i];
        x[i] = x0 + h;
        const double lp = loss(x);
        x[i] = x0 - h;
        const double lm = loss(x);
        x[i] = x0;
        g[i] = (lp - lm) / (2.0 * h);
    }
    return g;
}
// CHECKs max |a - b| / max |b| <= tol for two double vectors (reference vs finite differences).
void check_close(const std::string& what, const std::vector<double>& a,
                 const std::vector<double>& b, double tol);

// ---- the GPU ---------------------------------------------------------------------------------
// A device buffer of n elements of T (freed with the buffer).
template <class T> class DevBuf {
  public:
    DevBuf() = default;
    DevBuf(device::Device* d, size_t n);
    DevBuf(DevBuf&& o) noexcept : d_(o.d_), p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
    DevBuf& operator=(DevBuf&&) = delete;
    DevBuf(const DevBuf&) = delete;
    ~DevBuf();
    T* get() const { return p_; }
    size_t size() const { return n_; }

  private:
    device::Device* d_ = nullptr;
    T* p_ = nullptr;
    size_t n_ = 0;
};

// The CUDA device 0 with one stream, its cuBLASLt context and scratch; created once, on first use.
class Gpu {
  public:
    Gpu();
    ~Gpu();
    kernels::Exec exec() const; // {Cuda, the stream, the Blas}
    device::Device& dev() { return *dev_; }
    void sync();
    // fp32 values -> a device tensor of T (bf16: rounded); ids as they are.
    template <class T> DevBuf<T> upload(const std::vector<float>& v);
    DevBuf<int> upload_ids(const std::vector<int>& v);
    // A device tensor of T -> fp32 values (after a sync).
    template <class T> std::vector<float> download(const DevBuf<T>& b);
    template <class T> std::vector<float> download(const T* p, size_t n);
    // Raw elements both ways (ids, bf16 bits, GradStats).
    template <class T> DevBuf<T> upload_raw(const std::vector<T>& v) {
        DevBuf<T> b(dev_.get(), v.size());
        dev_->copy(b.get(), v.data(), v.size() * sizeof(T), device::CopyKind::HostToDevice,
                   *stream_);
        sync();
        return b;
    }
    template <class T> std::vector<T> download_raw(const T* p, size_t n) {
        std::vector<T> h(n);
        dev_->copy(h.data(), p, n * sizeof(T), device::CopyKind::DeviceToHost, *stream_);
        sync();
        return h;
    }

  private:
    std::unique_ptr<device::Device> dev_;
    std::unique_ptr<device::Stream> stream_;
    std::unique_ptr<kernels::cuda::Blas> blas_;
    std::unique_ptr<kernels::Scratch> scratch_; // the ops' scratch on stream_ (grows as needed)
};

// True when this build has the CUDA twins and a GPU is visible.
bool gpu_available();
// The GPU context, or (no GPU) nullptr after a doctest MESSAGE saying the case was skipped.
Gpu* gpu_or_skip();

template <class T> const char* dtype_name();

} // namespace sof::ktest
