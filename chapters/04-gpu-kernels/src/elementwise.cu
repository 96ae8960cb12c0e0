// Element-wise kernels: vector add with a grid-stride loop, a coalesced and a strided copy.
#include <stdexcept>
#include <string>

#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernels.hpp"
#include "occupancy.cuh"

namespace concurdl::gpu {

namespace {

constexpr unsigned kBlock = 256;

__global__ void vector_add_kernel(const float* a, const float* b, float* c, std::size_t n) {
  // Grid-stride: the grid is sized to the GPU, and each thread walks the array in steps of the
  // grid's thread count, so any n runs with one launch and consecutive threads stay coalesced.
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    c[i] = a[i] + b[i];
}

__global__ void copy_coalesced_kernel(const float* in, float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = in[i];
}

__global__ void copy_strided_kernel(const float* in, float* out, std::size_t n, std::size_t step) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = in[strided_source(i, step, n)];  // a warp's 32 reads land in 32 sectors
}

unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(grid_blocks(n, kBlock, static_cast<std::size_t>(sm_count()) * 16));
}

}  // namespace

void vector_add(const float* a, const float* b, float* c, std::size_t n, cudaStream_t stream) {
  vector_add_kernel<<<blocks_for(n), kBlock, 0, stream>>>(a, b, c, n);
  CDL_CUDA_CHECK(cudaGetLastError());
}

void copy_coalesced(const float* in, float* out, std::size_t n, cudaStream_t stream) {
  copy_coalesced_kernel<<<blocks_for(n), kBlock, 0, stream>>>(in, out, n);
  CDL_CUDA_CHECK(cudaGetLastError());
}

void copy_strided(const float* in, float* out, std::size_t n, std::size_t stride,
                  cudaStream_t stream) {
  copy_strided_kernel<<<blocks_for(n), kBlock, 0, stream>>>(in, out, n, stride);
  CDL_CUDA_CHECK(cudaGetLastError());
}

KernelOccupancy elementwise_occupancy(std::string_view kernel) {
  if (kernel == "vector_add") return query_occupancy(vector_add_kernel, kBlock);
  if (kernel == "copy_coalesced") return query_occupancy(copy_coalesced_kernel, kBlock);
  if (kernel == "copy_strided") return query_occupancy(copy_strided_kernel, kBlock);
  throw std::invalid_argument("elementwise_occupancy: no kernel '" + std::string(kernel) + "'");
}

}  // namespace concurdl::gpu
