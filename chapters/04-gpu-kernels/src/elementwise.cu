// Element-wise kernels: vector add with a grid-stride loop, a coalesced and a strided copy; the
// kernels, then each one's launcher and occupancy query (launchers.hpp).
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

void vector_add(const float* a, const float* b, float* out, std::size_t n, cudaStream_t stream) {
  vector_add_kernel<<<blocks_for(n), kBlock, 0, stream>>>(a, b, out, n);
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy vector_add_occupancy() { return query_occupancy(vector_add_kernel, kBlock); }

void copy_coalesced(const float* a, const float*, float* out, std::size_t n, cudaStream_t stream) {
  copy_coalesced_kernel<<<blocks_for(n), kBlock, 0, stream>>>(a, out, n);
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy copy_coalesced_occupancy() {
  return query_occupancy(copy_coalesced_kernel, kBlock);
}

void copy_strided(const float* a, const float*, float* out, std::size_t n, cudaStream_t stream) {
  copy_strided_kernel<<<blocks_for(n), kBlock, 0, stream>>>(a, out, n, kStride);
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy copy_strided_occupancy() { return query_occupancy(copy_strided_kernel, kBlock); }

}  // namespace concurdl::gpu
