// The cuBLASLt context of one CUDA stream: the handle, a workspace sized once, and the matmul
// descriptors and algorithm chosen by the heuristics, cached per shape (cuda/blas.cu).
#pragma once

#include <cstddef>
#include <memory>

namespace sof::kernels::cuda {

class Blas {
  public:
    // For the stream (cudaStream_t) on the current device; workspace_bytes of device memory.
    // Throws core::Error (Runtime) in a build without CUDA or when cuBLASLt fails.
    static std::unique_ptr<Blas> create(void* stream, size_t workspace_bytes = 32u << 20);
    ~Blas();
    Blas(const Blas&) = delete;
    Blas& operator=(const Blas&) = delete;

    struct Impl;
    Impl& impl() { return *impl_; }
    size_t workspace_bytes() const;
    size_t cached_shapes() const; // distinct (shape, dtype, epilogue) plans so far

  private:
    explicit Blas(Impl* impl) : impl_(impl) {}
    Impl* impl_;
};

} // namespace sof::kernels::cuda
