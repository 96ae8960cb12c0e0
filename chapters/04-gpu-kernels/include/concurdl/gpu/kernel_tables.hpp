// Chapter 04's kernels as variant tables (core/variants.hpp): a row per kernel, simplest
// first, with its name, one line of what it changes, its launch and its occupancy query
// (launchers.hpp, defined beside the kernel in src/*.cu). The experiments take their variant
// axes from the tables and call the row they find; the tests run every row; `concurdl list` and
// the README's tables show each row's what.
//
// The rows live in src/kernel_tables.cpp, not in the .cu files: a row is C++20 (VariantInfo)
// and nvcc compiles the .cu files as C++17; and a build without CUDA still has every table, its
// names and texts (the experiments' axes, `concurdl list`, the README), with null launches and
// occupancy queries.
#pragma once

#include <span>

#include "concurdl/core/variants.hpp"
#include "concurdl/gpu/launchers.hpp"

namespace concurdl::gpu {

// A kernel of a family whose launches share the signature Launch.
template <class Launch>
struct KernelRow : VariantInfo {
  Launch* launch = nullptr;             // null where built without CUDA
  OccupancyQuery* occupancy = nullptr;  // null for the peers (CUB, cuBLAS), and without CUDA
};

// v1-v6 and CUB: ch04/reduction.
using ReduceKernel = KernelRow<ReduceLaunch>;
const VariantTable<ReduceKernel>& reduce_kernels();

// v1-v4, v6, v7 and cuBLAS: ch04/gemm.
using GemmKernel = KernelRow<GemmLaunch>;
const VariantTable<GemmKernel>& gemm_kernels();

// WMMA (v5, v6) and cuBLAS's 16-bit GEMMs: ch04/gemm_mixed. Each row takes its inputs in FP16
// or in BF16 (to_half or to_bfloat16 makes them).
struct GemmMixedKernel : KernelRow<GemmMixedLaunch> {
  bool bf16 = false;
};
const VariantTable<GemmMixedKernel>& gemm_mixed_kernels();

// Naive, through a shared-memory tile, through a padded tile: ch04/transpose.
using TransposeKernel = KernelRow<TransposeLaunch>;
const VariantTable<TransposeKernel>& transpose_kernels();

// Vector add, coalesced and strided copies: ch04/memory. Each is its own operation, with its
// CPU reference (out from the host copies of a and b) and its traffic.
using MemoryReference = void(std::span<const float> a, std::span<const float> b,
                             std::span<float> out);
struct MemoryKernel : VariantInfo {
  MemoryLaunch* launch = nullptr;
  OccupancyQuery* occupancy = nullptr;
  MemoryReference* reference = nullptr;
  double floats_moved = 0;  // per element, read and written
};
const VariantTable<MemoryKernel>& memory_kernels();

// Copy in, kernel, copy out from pageable or pinned host memory, whole or in chunks on streams:
// ch04/streams. The kernel is the same in every row; the transfers are what differ.
struct TransferSchedule : VariantInfo {
  RoundTrip* round_trip = nullptr;
  bool pinned = false;   // host memory from PinnedBuffer (else std::vector)
  bool chunked = false;  // the `chunks` axis applies
};
const VariantTable<TransferSchedule>& transfers();

}  // namespace concurdl::gpu
