// Chapter 04's kernels, callable from host C++ (CUDA builds only: include it where
// CONCURDL_HAVE_CUDA is 1). Each launcher enqueues its kernels on `stream` and returns at once;
// pointers are device memory. Every version has a CPU reference in reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

#include "concurdl/gpu/roofline.hpp"
#include "concurdl/harness/errors.hpp"

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

// The reduction's versions, each a step from the one before (reduce.cu has the detail):
//   v1_atomic_global     every thread atomicAdds its element to one float in global memory
//   v2_tree_divergent    a shared-memory tree per block, thread tid % (2s) == 0 adding:
//                        the active threads of a warp are scattered, so every warp diverges
//   v3_sequential        the tree with threads tid < s adding: active threads stay packed in
//                        the first warps, and whole warps retire
//   v4_warp_shuffle      the last 32 values summed in registers with __shfl_down_sync, no
//                        shared memory and no __syncthreads inside a warp
//   v5_multi_element     each thread first sums many elements (a grid-stride loop, as many
//                        blocks as fill the GPU), then v4's warp sums, one atomic per block
//   cub                  CUB's DeviceReduce::Sum: the peer
enum class Reduce {
  v1_atomic_global,
  v2_tree_divergent,
  v3_sequential,
  v4_warp_shuffle,
  v5_multi_element,
  cub
};
std::string_view reduce_name(Reduce v);

// The scratch `reduce_sum` needs for n elements (CUB's temporary storage; 0 for the others).
std::size_t reduce_scratch_bytes(std::size_t n);
// *d_out = the sum of d_in[0, n). Versions v1-v5 accumulate with atomicAdd into *d_out, which
// they zero first (on the stream); the order of the additions, and so the last bits, varies.
void reduce_sum(Reduce v, const float* d_in, std::size_t n, float* d_out, void* d_scratch,
                std::size_t scratch_bytes, cudaStream_t stream);

// c = a + b with a grid-stride loop (a grid sized to the GPU, not to n).
void vector_add(const float* a, const float* b, float* c, std::size_t n, cudaStream_t stream);
// out[i] = in[i]: consecutive threads, consecutive addresses (coalesced).
void copy_coalesced(const float* in, float* out, std::size_t n, cudaStream_t stream);
// out[i] = in[strided_source(i, stride, n)]: consecutive threads read `stride` floats apart.
void copy_strided(const float* in, float* out, std::size_t n, std::size_t stride,
                  cudaStream_t stream);

// GEMM, C = A B row-major (A m x k, B k x n, C m x n), float in and out:
//   v1_naive              one thread per element of C, threads along x walking rows of C:
//                         a warp reads 32 rows of A and writes 32 rows of C (uncoalesced)
//   v2_coalesced          the same work, a warp along 32 neighbouring columns of one row
//   v3_shared_tiles       32 x 32 tiles of A and B staged in shared memory (each element read
//                         from global memory 32 times fewer)
//   v4_register_blocking  64 x 64 tiles per block, an 8 x 8 tile of C per thread in registers
//   cublas                cublasSgemm: the peer
// (gemm_tiles.hpp holds each version's per-thread index arithmetic, tested on the CPU.)
enum class Gemm { v1_naive, v2_coalesced, v3_shared_tiles, v4_register_blocking, cublas };
std::string_view gemm_name(Gemm v);
void gemm(Gemm v, const float* a, const float* b, float* c, int m, int n, int k,
          cudaStream_t stream);

// Mixed precision: A and B in FP16 (made with to_half), C accumulated and stored in FP32; m, n
// and k multiples of 16 (else std::invalid_argument).
//   v5_wmma      one warp per 16 x 16 tile of C on the tensor cores (nvcuda::wmma)
//   cublas_fp16  cublasGemmEx, FP16 in, FP32 compute and out: the peer
enum class GemmMixed { v5_wmma, cublas_fp16 };
std::string_view gemm_mixed_name(GemmMixed v);
// out[i] = in[i] rounded to FP16; `out` holds n halves (2 n bytes).
void to_half(const float* in, void* out, std::size_t n, cudaStream_t stream);
void gemm_mixed(GemmMixed v, const void* a, const void* b, float* c, int m, int n, int k,
                cudaStream_t stream);

// out (cols x rows) = in (rows x cols) transposed: naive, through a 32 x 32 shared-memory tile,
// through the tile padded to 33 floats a row (index.hpp: transpose_step).
enum class Transpose { naive, shared, padded };
std::string_view transpose_name(Transpose v);
void transpose(Transpose v, const float* in, float* out, int rows, int cols, cudaStream_t stream);

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

// host_out = 2 host_in + 1 computed on the GPU: copy in, kernel, copy out.
//   pageable_sync   from std::vector memory, each step waiting for the one before
//   pinned_sync     the same from pinned memory (host_in/out from PinnedBuffer)
//   pinned_streams  `chunks` pieces, each copy in / kernel / copy out on a stream of its own,
//                   from pinned memory: the copies of one piece overlap another's kernel
// Returns when host_out holds the result.
enum class Transfer { pageable_sync, pinned_sync, pinned_streams };
std::string_view transfer_name(Transfer v);
void copy_compute_copy(Transfer v, const float* host_in, float* host_out, float* d_in, float* d_out,
                       std::size_t n, int chunks);

// The current device's streaming multiprocessors (grid sizes are a multiple of them).
int sm_count();

// One block of a kernel as an SM sees it: what it asks for (its registers as compiled and its
// shared memory, from cudaFuncGetAttributes, and its launch's block size) and how many such
// blocks the runtime says fit on one SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), which
// roofline.hpp's occupancy() computes from the resources and tells why.
struct KernelOccupancy {
  KernelResources resources;
  int runtime_blocks = 0;
};
// Each version's kernel at the block size its launcher uses; nullopt for the peers (CUB's and
// cuBLAS's kernels and launches are theirs to choose).
std::optional<KernelOccupancy> reduce_occupancy(Reduce v);
std::optional<KernelOccupancy> gemm_occupancy(Gemm v);
std::optional<KernelOccupancy> gemm_mixed_occupancy(GemmMixed v);
KernelOccupancy transpose_occupancy(Transpose v);
// "vector_add", "copy_coalesced" or "copy_strided" (else std::invalid_argument).
KernelOccupancy elementwise_occupancy(std::string_view kernel);

}  // namespace concurdl::gpu
