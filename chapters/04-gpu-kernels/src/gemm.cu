// The GEMM versions and cuBLAS, the peer: the kernels, then each one's launcher and occupancy
// query (launchers.hpp; gemm_tiles.hpp has each thread's work, the rows of gemm_kernels() and
// gemm_mixed_kernels() in kernel_tables.cpp what each changes). Row-major throughout.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/gemm_warp_tiles.hpp"
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

// v6: warp tiles (gemm_warp_tiles.hpp), one buffer: load, sync, multiply, sync. Vec: the
// launcher checked that 128-bit accesses are aligned (K and N multiples of 4, aligned matrices).
template <bool Vec>
__global__ void __launch_bounds__(kWThreads, 2)
    gemm_v6(const float* a, const float* b, float* c, GemmShape s) {
  __shared__ __align__(16) float as[kWBK * kWBM];
  __shared__ __align__(16) float bs[kWBK * kWBN];
  float acc[kWTM * kWTN] = {};
  const int tiles = static_cast<int>(ceil_div(s.k, kWBK));
  for (int t = 0; t < tiles; ++t) {
    WarpTileLoads r;
    w_fetch(a, b, s, blockIdx.x, blockIdx.y, t, threadIdx.x, Vec, r);
    w_stash(r, threadIdx.x, as, bs);
    __syncthreads();
    w_accumulate(as, bs, threadIdx.x, acc);
    __syncthreads();
  }
  w_store(c, s, blockIdx.x, blockIdx.y, threadIdx.x, Vec, acc);
}

// v7: v6 double buffered. Step t + 1's values are loaded into registers before step t's
// multiply-adds and stored to the other buffer after them; one barrier a step suffices, since a
// buffer is written only after every thread has passed the barrier that ended its last reads.
template <bool Vec>
__global__ void __launch_bounds__(kWThreads, 2)
    gemm_v7(const float* a, const float* b, float* c, GemmShape s) {
  __shared__ __align__(16) float as[2][kWBK * kWBM];
  __shared__ __align__(16) float bs[2][kWBK * kWBN];
  float acc[kWTM * kWTN] = {};
  const int tiles = static_cast<int>(ceil_div(s.k, kWBK));
  WarpTileLoads r;
  w_fetch(a, b, s, blockIdx.x, blockIdx.y, 0, threadIdx.x, Vec, r);
  w_stash(r, threadIdx.x, as[0], bs[0]);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    if (more) w_fetch(a, b, s, blockIdx.x, blockIdx.y, t + 1, threadIdx.x, Vec, r);
    w_accumulate(as[cur], bs[cur], threadIdx.x, acc);
    if (more) w_stash(r, threadIdx.x, as[cur ^ 1], bs[cur ^ 1]);
    __syncthreads();
  }
  w_store(c, s, blockIdx.x, blockIdx.y, threadIdx.x, Vec, acc);
}

// 128-bit loads and stores of A, B and C are aligned: rows of multiples of 4 floats from
// 16-byte aligned matrices.
bool aligned(const void* p, std::uintptr_t to) {
  return reinterpret_cast<std::uintptr_t>(p) % to == 0;
}
bool vectorizable(const float* a, const float* b, const float* c, int n, int k) {
  return n % 4 == 0 && k % 4 == 0 && aligned(a, 16) && aligned(b, 16) && aligned(c, 16);
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

// v6 on the tensor cores: a block of 8 warps computes a 128 x 128 tile of C, each warp a 64 x 32
// part of it as 4 x 2 WMMA accumulators. Per K step of 32, the block stages a 128 x 32 tile of A
// and a 32 x 128 tile of B in shared memory (16-byte loads, 8 values each; rows padded by 8
// values against bank conflicts), double buffered as v7: step t + 1's loads are in flight while
// the warps multiply step t's. A warp reads each fragment of A once for 2 products and each of
// B once for 4 (v5: one fragment of each per product, from global memory). T: __half or
// __nv_bfloat16. m, n and k multiples of 16: a fragment of C is inside C or outside it.
constexpr int kTcBM = 128, kTcBN = 128, kTcBK = 32, kTcPad = 8;
constexpr int kTcThreads = 256;
constexpr int kTcLdA = kTcBK + kTcPad, kTcLdB = kTcBN + kTcPad;  // values a row in shared memory

struct TcLoads {
  uint4 a[2], b[2];  // 8 values of A and of B each, 2 of each a thread a step
};

template <class T>
__device__ void tc_fetch(const T* a, const T* b, int m, int n, int k, int t, TcLoads& r) {
  const int k0 = t * kTcBK;
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int idx = static_cast<int>(threadIdx.x) + p * kTcThreads;
    const int row = blockIdx.y * kTcBM + idx / 4, ka = k0 + idx % 4 * 8;
    r.a[p] = row < m && ka < k
                 ? *reinterpret_cast<const uint4*>(a + static_cast<std::size_t>(row) * k + ka)
                 : make_uint4(0, 0, 0, 0);
    const int kb = k0 + idx / 16, col = blockIdx.x * kTcBN + idx % 16 * 8;
    r.b[p] = kb < k && col < n
                 ? *reinterpret_cast<const uint4*>(b + static_cast<std::size_t>(kb) * n + col)
                 : make_uint4(0, 0, 0, 0);
  }
}

template <class T>
__device__ void tc_stash(const TcLoads& r, T* as, T* bs) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int idx = static_cast<int>(threadIdx.x) + p * kTcThreads;
    *reinterpret_cast<uint4*>(as + idx / 4 * kTcLdA + idx % 4 * 8) = r.a[p];
    *reinterpret_cast<uint4*>(bs + idx / 16 * kTcLdB + idx % 16 * 8) = r.b[p];
  }
}

template <class T>
__global__ void __launch_bounds__(kTcThreads, 2)
    gemm_wmma_tiles(const T* a, const T* b, float* c, int m, int n, int k) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) T as[2][kTcBM * kTcLdA];
  __shared__ __align__(32) T bs[2][kTcBK * kTcLdB];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int wr = warp / 4 * 64, wc = warp % 4 * 32;  // the warp's part of the block's tile
  wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  const int tiles = (k + kTcBK - 1) / kTcBK;
  TcLoads r;
  tc_fetch(a, b, m, n, k, 0, r);
  tc_stash(r, as[0], bs[0]);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    if (more) tc_fetch(a, b, m, n, k, t + 1, r);
#pragma unroll
    for (int kk = 0; kk < kTcBK; kk += kWmma) {
      wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, T, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, T, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        wmma::load_matrix_sync(fa[i], as[cur] + (wr + i * kWmma) * kTcLdA + kk, kTcLdA);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(fb[j], bs[cur] + kk * kTcLdB + wc + j * kWmma, kTcLdB);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    if (more) tc_stash(r, as[cur ^ 1], bs[cur ^ 1]);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = blockIdx.y * kTcBM + wr + i * kWmma;
      const int col = blockIdx.x * kTcBN + wc + j * kWmma;
      if (row < m && col < n)
        wmma::store_matrix_sync(c + static_cast<std::size_t>(row) * n + col, acc[i][j], n,
                                wmma::mem_row_major);
    }
#else
  __trap();  // compiled for sm_80 and later only (BF16 fragments); the launcher refuses older GPUs
#endif
}

__global__ void to_half_kernel(const float* in, __half* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = __float2half_rn(in[i]);
}

__global__ void to_bfloat16_kernel(const float* in, __nv_bfloat16* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = __float2bfloat16_rn(in[i]);
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

template <class T>
void launch_wmma_tiles(const void* a, const void* b, float* c, int m, int n, int k,
                       cudaStream_t stream) {
  check_multiples_of_16(m, n, k);
  // Its 16-byte loads of A and B and WMMA's 32-byte aligned stores of C.
  if (!aligned(a, 16) || !aligned(b, 16) || !aligned(c, 32))
    throw std::invalid_argument("gemm_mixed v6: A and B must be 16-byte aligned, C 32-byte");
  int device = 0, major = 0;
  CDL_CUDA_CHECK(cudaGetDevice(&device));
  CDL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8)
    throw std::runtime_error("gemm_mixed v6: needs compute capability 8.0 or later (BF16 WMMA)");
  gemm_wmma_tiles<T><<<dim3(blocks(n, kTcBN), blocks(m, kTcBM)), kTcThreads, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), c, m, n, k);
  CDL_CUDA_CHECK(cudaGetLastError());
}

void cublas_16bit(const void* a, const void* b, float* c, int m, int n, int k, cudaDataType type,
                  cudaStream_t stream) {
  check_multiples_of_16(m, n, k);
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasSetStream(cublas(), stream), "cublasSetStream");
  check_cublas(cublasGemmEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, type, n, a, type,
                            k, &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
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

void gemm_v6_warp_tiles(const float* a, const float* b, float* c, int m, int n, int k,
                        cudaStream_t stream) {
  const dim3 grid(blocks(n, kWBN), blocks(m, kWBM));
  if (vectorizable(a, b, c, n, k))
    gemm_v6<true><<<grid, kWThreads, 0, stream>>>(a, b, c, GemmShape{m, n, k});
  else
    gemm_v6<false><<<grid, kWThreads, 0, stream>>>(a, b, c, GemmShape{m, n, k});
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v6_warp_tiles_occupancy() { return query_occupancy(gemm_v6<true>, kWThreads); }

void gemm_v7_double_buffered(const float* a, const float* b, float* c, int m, int n, int k,
                             cudaStream_t stream) {
  const dim3 grid(blocks(n, kWBN), blocks(m, kWBM));
  if (vectorizable(a, b, c, n, k))
    gemm_v7<true><<<grid, kWThreads, 0, stream>>>(a, b, c, GemmShape{m, n, k});
  else
    gemm_v7<false><<<grid, kWThreads, 0, stream>>>(a, b, c, GemmShape{m, n, k});
  CDL_CUDA_CHECK(cudaGetLastError());
}
KernelOccupancy gemm_v7_double_buffered_occupancy() {
  return query_occupancy(gemm_v7<true>, kWThreads);
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

void gemm_v6_wmma_tiles(const void* a, const void* b, float* c, int m, int n, int k,
                        cudaStream_t stream) {
  launch_wmma_tiles<__half>(a, b, c, m, n, k, stream);
}
KernelOccupancy gemm_v6_wmma_tiles_occupancy() {
  return query_occupancy(gemm_wmma_tiles<__half>, kTcThreads);
}

void gemm_v6_wmma_tiles_bf16(const void* a, const void* b, float* c, int m, int n, int k,
                             cudaStream_t stream) {
  launch_wmma_tiles<__nv_bfloat16>(a, b, c, m, n, k, stream);
}
KernelOccupancy gemm_v6_wmma_tiles_bf16_occupancy() {
  return query_occupancy(gemm_wmma_tiles<__nv_bfloat16>, kTcThreads);
}

void gemm_cublas_fp16(const void* a, const void* b, float* c, int m, int n, int k,
                      cudaStream_t stream) {
  cublas_16bit(a, b, c, m, n, k, CUDA_R_16F, stream);
}

void gemm_cublas_bf16(const void* a, const void* b, float* c, int m, int n, int k,
                      cudaStream_t stream) {
  cublas_16bit(a, b, c, m, n, k, CUDA_R_16BF, stream);
}

void to_half(const float* in, void* out, std::size_t n, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>(grid_blocks(n, 256, static_cast<std::size_t>(sm_count()) * 16));
  to_half_kernel<<<blocks, 256, 0, stream>>>(in, static_cast<__half*>(out), n);
  CDL_CUDA_CHECK(cudaGetLastError());
}

void to_bfloat16(const float* in, void* out, std::size_t n, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>(grid_blocks(n, 256, static_cast<std::size_t>(sm_count()) * 16));
  to_bfloat16_kernel<<<blocks, 256, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), n);
  CDL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace concurdl::gpu
