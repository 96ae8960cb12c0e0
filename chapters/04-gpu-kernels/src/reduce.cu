// The reduction, six versions and CUB: the kernels, then each one's launcher and occupancy query
// (launchers.hpp; the rows of reduce_kernels() in kernel_tables.cpp say what each changes). One
// block size (256) throughout; v1-v4 give each thread one element, v5 and v6 many.
#include <cstdint>
#include <cub/device/device_reduce.cuh>

#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernels.hpp"
#include "occupancy.cuh"

namespace concurdl::gpu {

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kWarp = kWarpSize;

__global__ void v1_atomic_global(const float* in, std::size_t n, float* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) atomicAdd(out, in[i]);  // n atomics on one address: serialised in L2
}

__global__ void v2_tree_divergent(const float* in, std::size_t n, float* out) {
  __shared__ float s[kBlock];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(kBlock) + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned step = 1; step < kBlock; step *= 2) {
    if (v2_adds(tid, step)) s[tid] += s[tid + step];  // scattered active threads: divergence
    __syncthreads();
  }
  if (tid == 0) atomicAdd(out, s[0]);
}

__global__ void v3_sequential(const float* in, std::size_t n, float* out) {
  __shared__ float s[kBlock];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(kBlock) + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned step = kBlock / 2; step > 0; step /= 2) {
    if (v3_adds(tid, step)) s[tid] += s[tid + step];  // active threads packed: warps retire
    __syncthreads();
  }
  if (tid == 0) atomicAdd(out, s[0]);
}

// A warp's lanes exchanging registers: all 32 take part in every shuffle.
struct DeviceWarp {
  __device__ float shfl_down(float v, unsigned offset) const {
    return __shfl_down_sync(0xffffffffu, v, offset);
  }
};

// The sum of a warp's 32 values, in registers (index.hpp): after it, lane 0 holds the total.
__device__ float warp_sum(float v) {
  DeviceWarp warp;
  return warp_shuffle_sum(warp, v);
}

// The block's sum from each thread's value: warp sums, then the first warp sums those.
__device__ float block_sum(float v) {
  __shared__ float warp_totals[kBlock / kWarp];
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  v = threadIdx.x < kBlock / kWarp ? warp_totals[threadIdx.x] : 0.0f;
  return warp < 1 ? warp_sum(v) : 0.0f;
}

__global__ void v4_warp_shuffle(const float* in, std::size_t n, float* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(kBlock) + threadIdx.x;
  const float total = block_sum(i < n ? in[i] : 0.0f);
  if (threadIdx.x == 0) atomicAdd(out, total);
}

__global__ void v5_multi_element(const float* in, std::size_t n, float* out) {
  const float v =
      grid_stride_sum(in, n, blockIdx.x * static_cast<std::size_t>(kBlock) + threadIdx.x,
                      static_cast<std::size_t>(gridDim.x) * kBlock);
  const float total = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(out, total);
}

// v6: v5 with 16-byte loads, four in flight a thread (grid_stride_sum4).
__global__ void v6_vectorized(const float* in, std::size_t n, float* out) {
  const float v =
      grid_stride_sum4(in, n, blockIdx.x * static_cast<std::size_t>(kBlock) + threadIdx.x,
                       static_cast<std::size_t>(gridDim.x) * kBlock);
  const float total = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(out, total);
}

// Every version zeroes the sum it adds into, on the stream; v1-v4 then launch one thread per
// element (`kernel` launched through its pointer, as any __global__ function can be).
void zero_sum(float* d_out, cudaStream_t stream) {
  CDL_CUDA_CHECK(cudaMemsetAsync(d_out, 0, sizeof(float), stream));
}

using SumKernel = void(const float*, std::size_t, float*);

void one_element_each(SumKernel* kernel, const float* d_in, std::size_t n, float* d_out,
                      cudaStream_t stream) {
  zero_sum(d_out, stream);
  if (n == 0) return;
  kernel<<<static_cast<unsigned>(ceil_div(n, kBlock)), kBlock, 0, stream>>>(d_in, n, d_out);
  CDL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void reduce_v1_atomic_global(const float* d_in, std::size_t n, float* d_out, void*, std::size_t,
                             cudaStream_t stream) {
  one_element_each(v1_atomic_global, d_in, n, d_out, stream);
}
KernelOccupancy reduce_v1_atomic_global_occupancy() {
  return query_occupancy(v1_atomic_global, kBlock);
}

void reduce_v2_tree_divergent(const float* d_in, std::size_t n, float* d_out, void*, std::size_t,
                              cudaStream_t stream) {
  one_element_each(v2_tree_divergent, d_in, n, d_out, stream);
}
KernelOccupancy reduce_v2_tree_divergent_occupancy() {
  return query_occupancy(v2_tree_divergent, kBlock);
}

void reduce_v3_sequential(const float* d_in, std::size_t n, float* d_out, void*, std::size_t,
                          cudaStream_t stream) {
  one_element_each(v3_sequential, d_in, n, d_out, stream);
}
KernelOccupancy reduce_v3_sequential_occupancy() { return query_occupancy(v3_sequential, kBlock); }

void reduce_v4_warp_shuffle(const float* d_in, std::size_t n, float* d_out, void*, std::size_t,
                            cudaStream_t stream) {
  one_element_each(v4_warp_shuffle, d_in, n, d_out, stream);
}
KernelOccupancy reduce_v4_warp_shuffle_occupancy() {
  return query_occupancy(v4_warp_shuffle, kBlock);
}

void reduce_v5_multi_element(const float* d_in, std::size_t n, float* d_out, void*, std::size_t,
                             cudaStream_t stream) {
  zero_sum(d_out, stream);
  if (n == 0) return;
  // 8 blocks of 256 an SM, every thread the GPU holds, no more: each thread then sums
  // n / (blocks x 256) elements before any synchronisation.
  const auto blocks =
      static_cast<unsigned>(grid_blocks(n, kBlock, static_cast<std::size_t>(sm_count()) * 8));
  v5_multi_element<<<blocks, kBlock, 0, stream>>>(d_in, n, d_out);
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy reduce_v5_multi_element_occupancy() {
  return query_occupancy(v5_multi_element, kBlock);
}

void reduce_v6_vectorized(const float* d_in, std::size_t n, float* d_out, void*, std::size_t,
                          cudaStream_t stream) {
  zero_sum(d_out, stream);
  if (n == 0) return;
  // Every thread of the GPU resident (8 blocks of 256 an SM), no more; a thread's 16 floats of
  // one round of loads in flight.
  const auto blocks = static_cast<unsigned>(
      grid_blocks(ceil_div(n, 16), kBlock, static_cast<std::size_t>(sm_count()) * 8));
  if (reinterpret_cast<std::uintptr_t>(d_in) % 16 == 0)
    v6_vectorized<<<blocks, kBlock, 0, stream>>>(d_in, n, d_out);
  else  // 16-byte loads need 16-byte alignment: v5's loop then
    v5_multi_element<<<blocks, kBlock, 0, stream>>>(d_in, n, d_out);
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy reduce_v6_vectorized_occupancy() { return query_occupancy(v6_vectorized, kBlock); }

void reduce_cub(const float* d_in, std::size_t n, float* d_out, void* d_scratch,
                std::size_t scratch_bytes, cudaStream_t stream) {
  CDL_CUDA_CHECK(cub::DeviceReduce::Sum(d_scratch, scratch_bytes, d_in, d_out, n, stream));
}

std::size_t reduce_scratch_bytes(std::size_t n) {
  std::size_t bytes = 0;
  CDL_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, static_cast<const float*>(nullptr),
                                        static_cast<float*>(nullptr), n));
  return bytes;
}

int sm_count() {
  int device = 0, sms = 0;
  CDL_CUDA_CHECK(cudaGetDevice(&device));
  CDL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace concurdl::gpu
