// Host <-> device transfers around a kernel: synchronous from pageable memory, synchronous from
// pinned memory, and pipelined over chunks on several streams from pinned memory, so that one
// chunk's copy in, another's kernel and a third's copy out overlap (launchers.hpp: RoundTrip).
#include <stdexcept>
#include <vector>

#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernels.hpp"

namespace concurdl::gpu {

namespace {

__global__ void affine_kernel(const float* in, float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = 2.0f * in[i] + 1.0f;
}

void affine(const float* in, float* out, std::size_t n, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>(grid_blocks(n, 256, static_cast<std::size_t>(sm_count()) * 16));
  affine_kernel<<<blocks, 256, 0, stream>>>(in, out, n);
  CDL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

PinnedBuffer::PinnedBuffer(std::size_t n) : n_(n) {
  if (n > 0) CDL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(float)));
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) cudaFreeHost(p_);
}

void round_trip_sync(const float* host_in, float* host_out, float* d_in, float* d_out,
                     std::size_t n, int) {
  // One copy in, the kernel, one copy out, each waiting for the one before. From pageable
  // memory the driver stages every copy through a pinned buffer of its own, in pieces.
  CDL_CUDA_CHECK(cudaMemcpy(d_in, host_in, n * sizeof(float), cudaMemcpyHostToDevice));
  affine(d_in, d_out, n, nullptr);
  CDL_CUDA_CHECK(cudaMemcpy(host_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
}

void round_trip_streams(const float* host_in, float* host_out, float* d_in, float* d_out,
                        std::size_t n, int chunks) {
  if (chunks < 1) throw std::invalid_argument("round_trip_streams: at least one chunk");
  std::vector<cudaStream_t> streams(static_cast<std::size_t>(chunks));
  for (auto& s : streams) CDL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::size_t per = ceil_div(n, static_cast<std::size_t>(chunks));
  for (int c = 0; c < chunks; ++c) {
    const std::size_t first = static_cast<std::size_t>(c) * per;
    if (first >= n) break;
    const std::size_t len = first + per <= n ? per : n - first;
    cudaStream_t s = streams[static_cast<std::size_t>(c)];
    CDL_CUDA_CHECK(cudaMemcpyAsync(d_in + first, host_in + first, len * sizeof(float),
                                   cudaMemcpyHostToDevice, s));
    affine(d_in + first, d_out + first, len, s);
    CDL_CUDA_CHECK(cudaMemcpyAsync(host_out + first, d_out + first, len * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
  }
  for (auto& s : streams) {
    CDL_CUDA_CHECK(cudaStreamSynchronize(s));
    CDL_CUDA_CHECK(cudaStreamDestroy(s));
  }
}

}  // namespace concurdl::gpu
