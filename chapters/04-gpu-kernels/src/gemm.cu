// The GEMM versions and cuBLAS, the peer: the kernels, then each one's launcher and occupancy
// query (launchers.hpp; gemm_tiles.hpp has each thread's work, the rows of gemm_kernels() and
// gemm_mixed_kernels() in kernel_tables.cpp what each changes). Row-major throughout.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/kernels.hpp"
#include "occupancy.cuh"

namespace concurdl::gpu {

namespace {

__global__ void gemm_v1(const float* a, const float* b, float* c, GemmShape s) {
  int row = 0, col = 0;
  v1_coords(blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, blockDim.x, blockDim.y, row, col);
  if (row < s.m && col < s.n) c[row * s.n + col] = dot_row_col(a, b, s, row, col);
}

__global__ void gemm_v2(const float* a, const float* b, float* c, GemmShape s) {
  int row = 0, col = 0;
  v2_coords(blockIdx.x, blockIdx.y, threadIdx.x, row, col);
  if (row < s.m && col < s.n) c[row * s.n + col] = dot_row_col(a, b, s, row, col);
}

__global__ void gemm_v3(const float* a, const float* b, float* c, GemmShape s) {
  __shared__ float as[kV3Tile * kV3Tile];
  __shared__ float bs[kV3Tile * kV3Tile];
  float acc = 0.0f;
  const int tiles = static_cast<int>(ceil_div(s.k, kV3Tile));
  for (int t = 0; t < tiles; ++t) {
    v3_load(a, b, s, blockIdx.x, blockIdx.y, t, threadIdx.x, threadIdx.y, as, bs);
    __syncthreads();
    acc = v3_accumulate(as, bs, threadIdx.x, threadIdx.y, acc);
    __syncthreads();
  }
  v3_store(c, s, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, acc);
}

__global__ void gemm_v4(const float* a, const float* b, float* c, GemmShape s) {
  __shared__ float as[kBM * kBK];
  __shared__ float bs[kBK * kBN];
  float acc[kTM * kTN] = {};
  const int tiles = static_cast<int>(ceil_div(s.k, kBK));
  for (int t = 0; t < tiles; ++t) {
    v4_load(a, b, s, blockIdx.x, blockIdx.y, t, threadIdx.x, as, bs);
    __syncthreads();
    v4_accumulate(as, bs, threadIdx.x, acc);
    __syncthreads();
  }
  v4_store(c, s, blockIdx.x, blockIdx.y, threadIdx.x, acc);
}

// v5: one warp per 16 x 16 tile of C on the tensor cores: FP16 fragments of A and B, an FP32
// accumulator, K in steps of 16 (WMMA's smallest shape for half inputs).
constexpr int kWmma = 16;
__global__ void gemm_wmma(const __half* a, const __half* b, float* c, int m, int n, int k) {
  namespace wmma = nvcuda::wmma;
  const int row = blockIdx.y * kWmma, col = blockIdx.x * kWmma;
  wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  for (int i = 0; i < k; i += kWmma) {
    wmma::load_matrix_sync(fa, a + static_cast<std::size_t>(row) * k + i, k);
    wmma::load_matrix_sync(fb, b + static_cast<std::size_t>(i) * n + col, n);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(c + static_cast<std::size_t>(row) * n + col, fc, n, wmma::mem_row_major);
}

__global__ void to_half_kernel(const float* in, __half* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = __float2half_rn(in[i]);
}

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw LibraryError("cuBLAS", static_cast<int>(st),
                       std::string("cuBLAS: ") + what + " failed with status " +
                           std::to_string(static_cast<int>(st)));
}

// One handle per process (made on first use, on the current device).
cublasHandle_t cublas() {
  static std::once_flag once;
  static cublasHandle_t handle = nullptr;
  std::call_once(once, [] { check_cublas(cublasCreate(&handle), "cublasCreate"); });
  return handle;
}

unsigned blocks(int extent, int tile) {
  return static_cast<unsigned>(
      ceil_div(static_cast<std::size_t>(extent > 0 ? extent : 1), static_cast<std::size_t>(tile)));
}

// The FP16 versions' shapes: whole 16 x 16 x 16 steps.
void check_multiples_of_16(int m, int n, int k) {
  if (m % kWmma || n % kWmma || k % kWmma)
    throw std::invalid_argument("gemm_mixed: m, n and k must be multiples of 16");
}

}  // namespace

void gemm_v1_naive(const float* a, const float* b, float* c, int m, int n, int k,
                   cudaStream_t stream) {
  gemm_v1<<<dim3(blocks(m, 32), blocks(n, 32)), dim3(32, 32), 0, stream>>>(a, b, c,
                                                                           GemmShape{m, n, k});
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v1_naive_occupancy() { return query_occupancy(gemm_v1, 32 * 32); }

void gemm_v2_coalesced(const float* a, const float* b, float* c, int m, int n, int k,
                       cudaStream_t stream) {
  gemm_v2<<<dim3(blocks(n, kV2Tile), blocks(m, kV2Tile)), kV2Tile * kV2Tile, 0, stream>>>(
      a, b, c, GemmShape{m, n, k});
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v2_coalesced_occupancy() {
  return query_occupancy(gemm_v2, kV2Tile * kV2Tile);
}

void gemm_v3_shared_tiles(const float* a, const float* b, float* c, int m, int n, int k,
                          cudaStream_t stream) {
  gemm_v3<<<dim3(blocks(n, kV3Tile), blocks(m, kV3Tile)), dim3(kV3Tile, kV3Tile), 0, stream>>>(
      a, b, c, GemmShape{m, n, k});
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v3_shared_tiles_occupancy() {
  return query_occupancy(gemm_v3, kV3Tile * kV3Tile);
}

void gemm_v4_register_blocking(const float* a, const float* b, float* c, int m, int n, int k,
                               cudaStream_t stream) {
  gemm_v4<<<dim3(blocks(n, kBN), blocks(m, kBM)), kV4Threads, 0, stream>>>(a, b, c,
                                                                           GemmShape{m, n, k});
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v4_register_blocking_occupancy() {
  return query_occupancy(gemm_v4, kV4Threads);
}

void gemm_cublas(const float* a, const float* b, float* c, int m, int n, int k,
                 cudaStream_t stream) {
  // cuBLAS is column-major: a row-major C = A B is the column-major Cᵀ = Bᵀ Aᵀ, which is B and
  // A as they lie in memory, swapped.
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasSetStream(cublas(), stream), "cublasSetStream");
  check_cublas(
      cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n),
      "cublasSgemm");
}

void gemm_v5_wmma(const void* a, const void* b, float* c, int m, int n, int k,
                  cudaStream_t stream) {
  check_multiples_of_16(m, n, k);
  gemm_wmma<<<dim3(static_cast<unsigned>(n / kWmma), static_cast<unsigned>(m / kWmma)), 32, 0,
              stream>>>(static_cast<const __half*>(a), static_cast<const __half*>(b), c, m, n, k);
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v5_wmma_occupancy() { return query_occupancy(gemm_wmma, 32); }

void gemm_cublas_fp16(const void* a, const void* b, float* c, int m, int n, int k,
                      cudaStream_t stream) {
  check_multiples_of_16(m, n, k);
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasSetStream(cublas(), stream), "cublasSetStream");
  check_cublas(
      cublasGemmEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16F, n, a,
                   CUDA_R_16F, k, &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

void to_half(const float* in, void* out, std::size_t n, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>(grid_blocks(n, 256, static_cast<std::size_t>(sm_count()) * 16));
  to_half_kernel<<<blocks, 256, 0, stream>>>(in, static_cast<__half*>(out), n);
  CDL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace concurdl::gpu
