// Matrix transposes: naive, through a shared-memory tile, and through a padded tile; the
// kernels, then each one's launcher and occupancy query (launchers.hpp). index.hpp has the
// thread-to-element arithmetic, tested on the CPU.
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernels.hpp"
#include "occupancy.cuh"

namespace concurdl::gpu {

namespace {

constexpr int kT = kTransposeTile, kR = kTransposeRows;

using TileKernel = void(const float*, float*, int, int);

__global__ void transpose_naive_kernel(const float* in, float* out, int rows, int cols) {
  for (int j = 0; j < kT / kR; ++j) {
    const TransposeStep s = transpose_step(blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, j);
    // Reads along a row (coalesced); writes down a column of out: 32 rows apart per warp.
    if (s.in_row < rows && s.in_col < cols)
      out[s.in_col * rows + s.in_row] = in[s.in_row * cols + s.in_col];
  }
}

template <int Pitch>
__global__ void transpose_tiled_kernel(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[kT * Pitch];
  for (int j = 0; j < kT / kR; ++j) {
    const TransposeStep s = transpose_step(blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, j);
    if (s.in_row < rows && s.in_col < cols)
      tile[(threadIdx.y + kR * j) * Pitch + threadIdx.x] = in[s.in_row * cols + s.in_col];
  }
  __syncthreads();
  for (int j = 0; j < kT / kR; ++j) {
    const TransposeStep s = transpose_step(blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, j);
    // Down a column of the tile: with Pitch 32 every thread of the warp in one bank.
    if (s.out_row < cols && s.out_col < rows)
      out[s.out_row * rows + s.out_col] = tile[threadIdx.x * Pitch + threadIdx.y + kR * j];
  }
}

// One thread block per 32 x 32 tile of the input, 32 x 8 threads (index.hpp).
void launch_tiles(TileKernel* kernel, const float* in, float* out, int rows, int cols,
                  cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols > 0 ? cols : 1, kT)),
                  static_cast<unsigned>(ceil_div(rows > 0 ? rows : 1, kT)));
  kernel<<<grid, dim3(kT, kR), 0, stream>>>(in, out, rows, cols);
  CDL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void transpose_naive(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  launch_tiles(transpose_naive_kernel, in, out, rows, cols, stream);
}
KernelOccupancy transpose_naive_occupancy() {
  return query_occupancy(transpose_naive_kernel, kT * kR);
}

void transpose_shared(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  launch_tiles(transpose_tiled_kernel<kT>, in, out, rows, cols, stream);
}
KernelOccupancy transpose_shared_occupancy() {
  return query_occupancy(transpose_tiled_kernel<kT>, kT * kR);
}

void transpose_padded(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  launch_tiles(transpose_tiled_kernel<kT + 1>, in, out, rows, cols, stream);
}
KernelOccupancy transpose_padded_occupancy() {
  return query_occupancy(transpose_tiled_kernel<kT + 1>, kT * kR);
}

}  // namespace concurdl::gpu
