// Chapter 04's kernels, callable from host C++ (CUDA builds only: include it where
// CONCURDL_HAVE_CUDA is 1): their launchers and occupancy queries (launchers.hpp, the rows of
// kernel_tables.hpp point at them), and the device and pinned host memory they work on. Every
// version has a CPU reference in reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "concurdl/core/errors.hpp"
#include "concurdl/gpu/launchers.hpp"

namespace concurdl::gpu {

// Device memory for n values of T, freed at the end of its scope; moved, never copied.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n > 0) CDL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// The scratch reduce_cub needs for n elements (CUB's temporary storage; the others need none).
std::size_t reduce_scratch_bytes(std::size_t n);

// out[i] = in[i] rounded to FP16, for the mixed-precision GEMMs; `out` holds n halves (2 n
// bytes).
void to_half(const float* in, void* out, std::size_t n, cudaStream_t stream);
// The same rounded to BF16 (round to nearest even).
void to_bfloat16(const float* in, void* out, std::size_t n, cudaStream_t stream);

// Host memory the driver has pinned (cudaMallocHost): DMA reads it directly, so copies from it
// can be asynchronous and overlap kernels. Moved, never copied.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t n);  // n floats
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  float* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

// The current device's streaming multiprocessors (grid sizes are a multiple of them).
int sm_count();

}  // namespace concurdl::gpu
