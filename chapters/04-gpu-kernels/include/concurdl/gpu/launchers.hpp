// How chapter 04's kernels are launched: one signature per family of kernels, and each kernel's
// launcher and occupancy query, defined beside the kernel in src/*.cu. The variant tables
// (kernel_tables.hpp, src/kernel_tables.cpp) point their rows at these. Plain C++17 without the
// CUDA headers: the .cu files include it (nvcc, through kernels.hpp), and so do the tables' C++20
// in every build. Pointers are device memory unless named host_; a launcher enqueues its work on
// `stream` and returns at once, unless it says otherwise.
//
// A launcher is declared through its family's function type: `ReduceLaunch reduce_cub;` declares
// `void reduce_cub(const float* d_in, std::size_t n, ...)`, whose definition spells it out.
#pragma once

#include <cstddef>

#include "concurdl/gpu/roofline.hpp"

struct CUstream_st;  // what a cudaStream_t points to: launches take a stream without cuda_runtime

namespace concurdl::gpu {

using Stream = CUstream_st*;  // cudaStream_t

// One block of a kernel as an SM sees it: what it asks for (its registers as compiled and its
// shared memory, from cudaFuncGetAttributes, and its launch's block size) and how many such
// blocks the runtime says fit on one SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), which
// roofline.hpp's occupancy() computes from the resources and tells why.
struct KernelOccupancy {
  KernelResources resources;
  int runtime_blocks = 0;
};
// A kernel's occupancy at the block size its launcher uses. The peers have none: CUB's and
// cuBLAS's kernels and launches are theirs to choose.
using OccupancyQuery = KernelOccupancy();

// --- ch04/reduction (reduce.cu) ---
// *d_out = the sum of d_in[0, n); d_scratch holds reduce_scratch_bytes(n) bytes (CUB's
// temporary storage; the others use none). v1-v6 zero *d_out on the stream, then accumulate
// into it with atomicAdd: the order of the additions, and so the last bits, varies.
using ReduceLaunch = void(const float* d_in, std::size_t n, float* d_out, void* d_scratch,
                          std::size_t scratch_bytes, Stream stream);
ReduceLaunch reduce_v1_atomic_global, reduce_v2_tree_divergent, reduce_v3_sequential,
    reduce_v4_warp_shuffle, reduce_v5_multi_element, reduce_v6_vectorized, reduce_cub;
OccupancyQuery reduce_v1_atomic_global_occupancy, reduce_v2_tree_divergent_occupancy,
    reduce_v3_sequential_occupancy, reduce_v4_warp_shuffle_occupancy,
    reduce_v5_multi_element_occupancy, reduce_v6_vectorized_occupancy;

// --- ch04/memory (elementwise.cu) ---
// out from a (and b): a grid-stride loop over n elements, the grid sized to the GPU, not to n.
// vector_add: out = a + b; copy_coalesced: out[i] = a[i]; copy_strided: out[i] =
// a[strided_source(i, kStride, n)] (index.hpp). The copies do not read b.
using MemoryLaunch = void(const float* a, const float* b, float* out, std::size_t n, Stream stream);
MemoryLaunch vector_add, copy_coalesced, copy_strided;
OccupancyQuery vector_add_occupancy, copy_coalesced_occupancy, copy_strided_occupancy;

// --- ch04/transpose (transpose.cu) ---
// out (cols x rows) = in (rows x cols) transposed (index.hpp: transpose_step).
using TransposeLaunch = void(const float* in, float* out, int rows, int cols, Stream stream);
TransposeLaunch transpose_naive, transpose_shared, transpose_padded;
OccupancyQuery transpose_naive_occupancy, transpose_shared_occupancy, transpose_padded_occupancy;

// --- ch04/gemm (gemm.cu) ---
// C = A B row-major (A m x k, B k x n, C m x n), float in and out (gemm_tiles.hpp holds each
// version's per-thread index arithmetic, tested on the CPU).
using GemmLaunch = void(const float* a, const float* b, float* c, int m, int n, int k,
                        Stream stream);
// v6 and v7: gemm_warp_tiles.hpp.
GemmLaunch gemm_v1_naive, gemm_v2_coalesced, gemm_v3_shared_tiles, gemm_v4_register_blocking,
    gemm_v6_warp_tiles, gemm_v7_double_buffered, gemm_cublas;
OccupancyQuery gemm_v1_naive_occupancy, gemm_v2_coalesced_occupancy, gemm_v3_shared_tiles_occupancy,
    gemm_v4_register_blocking_occupancy, gemm_v6_warp_tiles_occupancy,
    gemm_v7_double_buffered_occupancy;

// --- ch04/gemm_mixed (gemm.cu) ---
// The same product from A and B in FP16 (made with to_half) or, the _bf16 launchers, BF16 (made
// with to_bfloat16), C accumulated and stored in FP32; m, n and k multiples of 16 (else
// std::invalid_argument).
using GemmMixedLaunch = void(const void* a, const void* b, float* c, int m, int n, int k,
                             Stream stream);
GemmMixedLaunch gemm_v5_wmma, gemm_v6_wmma_tiles, gemm_v6_wmma_tiles_bf16, gemm_cublas_fp16,
    gemm_cublas_bf16;
OccupancyQuery gemm_v5_wmma_occupancy, gemm_v6_wmma_tiles_occupancy,
    gemm_v6_wmma_tiles_bf16_occupancy;

// --- ch04/streams (streams.cu) ---
// host_out = 2 host_in + 1 computed on the GPU: copy in, kernel, copy out, through d_in and
// d_out (n floats each). Returns when host_out holds the result.
//   round_trip_sync     one copy in, the kernel, one copy out, each waiting for the one before
//                       (`chunks` unused)
//   round_trip_streams  `chunks` pieces, each copy in / kernel / copy out on a stream of its
//                       own (host memory pinned: PinnedBuffer), so that the copies of one
//                       piece overlap another's kernel; chunks < 1 is std::invalid_argument
using RoundTrip = void(const float* host_in, float* host_out, float* d_in, float* d_out,
                       std::size_t n, int chunks);
RoundTrip round_trip_sync, round_trip_streams;

}  // namespace concurdl::gpu
