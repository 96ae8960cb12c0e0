// Chapter 04's variant tables (kernel_tables.hpp): a row per kernel, in the order the lessons
// take them, pointing at its launcher and occupancy query in the .cu beside it. A kernel is
// added with its launcher and query there, their names in launchers.hpp, and a row here.
#include "concurdl/gpu/kernel_tables.hpp"

#include <algorithm>

#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/reference.hpp"

// A launcher or query of a .cu file; null where the build has no CUDA (and so no .cu files).
#if CONCURDL_HAVE_CUDA
#define CDL_GPU(f) &f
#else
#define CDL_GPU(f) nullptr
#endif

namespace concurdl::gpu {

namespace {

constexpr ReduceKernel kReduceKernelRows[] = {
    {{"v1_atomic_global",
      "every thread `atomicAdd`s its element into one float in global memory: n atomics on one "
      "address, serialised in L2"},
     CDL_GPU(reduce_v1_atomic_global),
     CDL_GPU(reduce_v1_atomic_global_occupancy)},
    {{"v2_tree_divergent",
      "a shared-memory tree per block, thread `tid % (2s) == 0` adding: the active threads of a "
      "warp are scattered, and while s < 32 every warp diverges"},
     CDL_GPU(reduce_v2_tree_divergent),
     CDL_GPU(reduce_v2_tree_divergent_occupancy)},
    {{"v3_sequential",
      "the tree with threads tid < s adding: active threads stay packed in the first warps, "
      "whole warps retire"},
     CDL_GPU(reduce_v3_sequential),
     CDL_GPU(reduce_v3_sequential_occupancy)},
    {{"v4_warp_shuffle",
      "each warp's 32 values summed in registers with `__shfl_down_sync` (`warp_shuffle_sum`), "
      "no shared-memory tree, then the warps' totals through shared memory once"},
     CDL_GPU(reduce_v4_warp_shuffle),
     CDL_GPU(reduce_v4_warp_shuffle_occupancy)},
    {{"v5_multi_element",
      "each thread first sums many elements (`grid_stride_sum`, 8 blocks of 256 an SM: every "
      "thread the GPU holds), then v4's warp sums, one atomic per block"},
     CDL_GPU(reduce_v5_multi_element),
     CDL_GPU(reduce_v5_multi_element_occupancy)},
    {{"v6_vectorized",
      "v5 reading 16 bytes a load, four loads in flight a thread before the first add "
      "(`grid_stride_sum4`, a partial sum a load), on v5's grid"},
     CDL_GPU(reduce_v6_vectorized),
     CDL_GPU(reduce_v6_vectorized_occupancy)},
    {{"cub", "CUB's `DeviceReduce::Sum`: the peer"}, CDL_GPU(reduce_cub)},
};

void copy_ref(std::span<const float> a, std::span<const float>, std::span<float> out) {
  std::copy(a.begin(), a.end(), out.begin());
}
void copy_strided_ref_ab(std::span<const float> a, std::span<const float>, std::span<float> out) {
  copy_strided_ref(a, out, kStride);
}

constexpr MemoryKernel kMemoryKernelRows[] = {
    {{"vector_add",
      "c = a + b with a grid-stride loop: a grid sized to the GPU (16 blocks an SM), one launch "
      "for any n, consecutive threads on consecutive elements"},
     CDL_GPU(vector_add),
     CDL_GPU(vector_add_occupancy),
     &vector_add_ref,
     3},
    {{"copy_coalesced",
      "out[i] = in[i] in the same loop: a warp's read of 32 floats is 4 sectors (coalesced)"},
     CDL_GPU(copy_coalesced),
     CDL_GPU(copy_coalesced_occupancy),
     &copy_ref,
     2},
    {{"copy_strided",
      "the same copy with neighbouring threads reading 32 floats (128 bytes) apart "
      "(`strided_source`): 32 sectors for the same 128 useful bytes"},
     CDL_GPU(copy_strided),
     CDL_GPU(copy_strided_occupancy),
     &copy_strided_ref_ab,
     2},
};

constexpr TransposeKernel kTransposeKernelRows[] = {
    {{"naive", "reads rows and writes columns: every write of a warp lands 32 rows apart"},
     CDL_GPU(transpose_naive),
     CDL_GPU(transpose_naive_occupancy)},
    {{"shared",
      "through a 32 × 32 shared-memory tile: both global accesses coalesced, but reading the "
      "tile down a column puts a warp's 32 threads in one bank (a 32-way conflict)"},
     CDL_GPU(transpose_shared),
     CDL_GPU(transpose_shared_occupancy)},
    {{"padded", "the tile's rows padded to 33 floats: a column of it spreads over all 32 banks"},
     CDL_GPU(transpose_padded),
     CDL_GPU(transpose_padded_occupancy)},
};

constexpr GemmKernel kGemmKernelRows[] = {
    {{"v1_naive",
      "one thread, one element of C, threads along x walking rows: a warp reads 32 rows of A "
      "(32 sectors a request) and writes 32 rows of C"},
     CDL_GPU(gemm_v1_naive),
     CDL_GPU(gemm_v1_naive_occupancy)},
    {{"v2_coalesced",
      "the same work, a warp along 32 neighbouring columns of one row: B and C coalesced, A's "
      "element broadcast"},
     CDL_GPU(gemm_v2_coalesced),
     CDL_GPU(gemm_v2_coalesced_occupancy)},
    {{"v3_shared_tiles", "32 × 32 tiles of A and B staged in shared memory"},
     CDL_GPU(gemm_v3_shared_tiles),
     CDL_GPU(gemm_v3_shared_tiles_occupancy)},
    {{"v4_register_blocking",
      "64 × 64 tiles a block, an 8 × 8 tile of C a thread in registers: 8 values of A and 8 of B "
      "read from shared memory for 64 multiply-adds"},
     CDL_GPU(gemm_v4_register_blocking),
     CDL_GPU(gemm_v4_register_blocking_occupancy)},
    {{"v6_warp_tiles",
      "128 × 128 tiles a block of 8 warps, a warp a 64 × 32 part, a thread 8 × 8 in registers: "
      "A transposed in shared memory, 128-bit loads and stores, a warp's shared reads broadcast"},
     CDL_GPU(gemm_v6_warp_tiles),
     CDL_GPU(gemm_v6_warp_tiles_occupancy)},
    {{"v7_double_buffered",
      "v6 with two shared buffers: the next K step's global loads in flight during this step's "
      "multiply-adds, one barrier a step"},
     CDL_GPU(gemm_v7_double_buffered),
     CDL_GPU(gemm_v7_double_buffered_occupancy)},
    {{"cublas", "`cublasSgemm` (row-major as the column-major Cᵀ = Bᵀ Aᵀ): the peer"},
     CDL_GPU(gemm_cublas)},
};

constexpr GemmMixedKernel kGemmMixedKernelRows[] = {
    {{{"v5_wmma",
       "FP16 inputs, FP32 accumulation on the tensor cores (`nvcuda::wmma`, the Programming "
       "Guide's \"Warp Matrix Functions\"; one warp a 16 × 16 tile of C)"},
      CDL_GPU(gemm_v5_wmma),
      CDL_GPU(gemm_v5_wmma_occupancy)}},
    {{{"v6_wmma_tiles",
       "a 128 × 128 tile of C a block of 8 warps, A and B staged in shared memory 32 of K at a "
       "time (double buffered, rows padded), a warp 4 × 2 accumulators: each fragment read once "
       "for 2 or 4 products"},
      CDL_GPU(gemm_v6_wmma_tiles),
      CDL_GPU(gemm_v6_wmma_tiles_occupancy)}},
    {{{"v6_wmma_tiles_bf16", "v6_wmma_tiles with BF16 inputs (8 significant bits, FP32's range)"},
      CDL_GPU(gemm_v6_wmma_tiles_bf16),
      CDL_GPU(gemm_v6_wmma_tiles_bf16_occupancy)},
     true},
    {{{"cublas_fp16", "`cublasGemmEx`, FP16 in, FP32 compute: the peer"},
      CDL_GPU(gemm_cublas_fp16)}},
    {{{"cublas_bf16", "`cublasGemmEx`, BF16 in, FP32 compute: the BF16 peer"},
      CDL_GPU(gemm_cublas_bf16)},
     true},
};

constexpr TransferSchedule kTransferRows[] = {
    {{"pageable_sync",
      "from pageable memory (`std::vector`), each step waiting for the one before: the driver "
      "stages every copy through a pinned buffer of its own"},
     CDL_GPU(round_trip_sync)},
    {{"pinned_sync",
      "the same from pinned memory (`cudaMallocHost`), which the copy engine reads directly"},
     CDL_GPU(round_trip_sync),
     true},
    {{"pinned_streams",
      "`chunks` pieces from pinned memory, each copy in / kernel / copy out on a stream of its "
      "own: one piece's copies overlap another's kernel"},
     CDL_GPU(round_trip_streams),
     true,
     true},
};

}  // namespace

const VariantTable<ReduceKernel>& reduce_kernels() {
  static constexpr VariantTable table{kReduceKernelRows};
  return table;
}
const VariantTable<MemoryKernel>& memory_kernels() {
  static constexpr VariantTable table{kMemoryKernelRows};
  return table;
}
const VariantTable<TransposeKernel>& transpose_kernels() {
  static constexpr VariantTable table{kTransposeKernelRows};
  return table;
}
const VariantTable<GemmKernel>& gemm_kernels() {
  static constexpr VariantTable table{kGemmKernelRows};
  return table;
}
const VariantTable<GemmMixedKernel>& gemm_mixed_kernels() {
  static constexpr VariantTable table{kGemmMixedKernelRows};
  return table;
}
const VariantTable<TransferSchedule>& transfers() {
  static constexpr VariantTable table{kTransferRows};
  return table;
}

}  // namespace concurdl::gpu

#undef CDL_GPU
