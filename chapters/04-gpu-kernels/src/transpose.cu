// Matrix transposes: naive, through a shared-memory tile, and through a padded tile
// (index.hpp has the thread-to-element arithmetic, tested on the CPU).
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernels.hpp"
#include "occupancy.cuh"

namespace concurdl::gpu {

namespace {

constexpr int kT = kTransposeTile, kR = kTransposeRows;

__global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  for (int j = 0; j < kT / kR; ++j) {
    const TransposeStep s = transpose_step(blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, j);
    // Reads along a row (coalesced); writes down a column of out: 32 rows apart per warp.
    if (s.in_row < rows && s.in_col < cols)
      out[s.in_col * rows + s.in_row] = in[s.in_row * cols + s.in_col];
  }
}

template <int Pitch>
__global__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
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

}  // namespace

std::string_view transpose_name(Transpose v) {
  switch (v) {
    case Transpose::naive:
      return "naive";
    case Transpose::shared:
      return "shared";
    case Transpose::padded:
      return "padded";
  }
  return "?";
}

KernelOccupancy transpose_occupancy(Transpose v) {
  switch (v) {
    case Transpose::naive:
      return query_occupancy(transpose_naive, kT * kR);
    case Transpose::shared:
      return query_occupancy(transpose_tiled<kT>, kT * kR);
    case Transpose::padded:
      break;
  }
  return query_occupancy(transpose_tiled<kT + 1>, kT * kR);
}

void transpose(Transpose v, const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols > 0 ? cols : 1, kT)),
                  static_cast<unsigned>(ceil_div(rows > 0 ? rows : 1, kT)));
  const dim3 block(kT, kR);
  switch (v) {
    case Transpose::naive:
      transpose_naive<<<grid, block, 0, stream>>>(in, out, rows, cols);
      break;
    case Transpose::shared:
      transpose_tiled<kT><<<grid, block, 0, stream>>>(in, out, rows, cols);
      break;
    case Transpose::padded:
      transpose_tiled<kT + 1><<<grid, block, 0, stream>>>(in, out, rows, cols);
      break;
  }
  CDL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace concurdl::gpu
