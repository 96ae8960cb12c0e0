// Exercise 4.1 (chapter 04, exercises.md): GEMM through shared-memory tiles. The reference is
// v3 in gemm_tiles.hpp (v3_load, v3_accumulate, v3_store): try first, read after.
// Check it:  concurdl exercise ch04 4.1     (the tests on the CPU; on a GPU, a timing too)
// or faster: ch04_tests --gtest_filter='TiledGemmEx4_1/student.*'
#pragma once

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/index.hpp"

namespace concurdl::gpu {

inline constexpr int kStudentTile = 32;

// C = A B, row-major: A is s.m x s.k, B is s.k x s.n, C is s.m x s.n; none need be a multiple
// of the tile. A block is kStudentTile x kStudentTile threads, thread (tx, ty) with tx along
// the columns of C and ty along its rows, and it computes the tile of C at block column bx and
// block row by, one element a thread. The kernel (exercises/student_kernels.cu) is written:
//
//   float acc = 0;
//   for (int t = 0; t * kStudentTile < s.k; ++t) {
//     student_load(a, b, s, bx, by, t, tx, ty, as, bs);   // every thread of the block
//     __syncthreads();
//     acc = student_accumulate(as, bs, tx, ty, acc);      // every thread
//     __syncthreads();
//   }
//   student_store(c, s, bx, by, tx, ty, acc);
//
// as and bs are the block's shared arrays, kStudentTile x kStudentTile floats each, row-major.
// Write the three phases:
//   student_load        thread (tx, ty) copies ONE element of the t-th tile of A (rows of C's
//                       tile, columns t * tile ...) into as, and one of the t-th tile of B
//                       (rows t * tile ..., columns of C's tile) into bs; 0 for an element
//                       outside the matrix (the last tiles of a size that is not a multiple)
//   student_accumulate  acc plus the tile's contribution to C[row][col] from as and bs
//   student_store       C[row][col] = acc, inside C only
// The CPU tests run your phases as a block would (tests/tile_sim.hpp: every thread's load, then
// every thread's accumulate, tile after tile, then the stores) on shapes that are and are not
// multiples of the tile; on a GPU the timing runs them in the kernel above against v3.
//
// Hints: the 32 threads of a warp are 32 consecutive tx at one ty. Make them read 32
// consecutive floats of A and of B (coalesced: one 128-byte transaction each), and in the
// accumulate read bs along a row (32 banks) and as at one address (a broadcast). Think about:
// how many times each element of A is read from global memory, here and in v2 (one thread, one
// dot product from global memory), and what that does to the FLOPs per byte (the roofline).
CDL_HD inline void student_load([[maybe_unused]] const float* a, [[maybe_unused]] const float* b,
                                [[maybe_unused]] GemmShape s, [[maybe_unused]] int bx,
                                [[maybe_unused]] int by, [[maybe_unused]] int t,
                                [[maybe_unused]] int tx, [[maybe_unused]] int ty,
                                [[maybe_unused]] float* as, [[maybe_unused]] float* bs) {
  CDL_HD_TODO("4.1 tiled GEMM");
}

CDL_HD inline float student_accumulate([[maybe_unused]] const float* as,
                                       [[maybe_unused]] const float* bs, [[maybe_unused]] int tx,
                                       [[maybe_unused]] int ty, float acc) {
  CDL_HD_TODO("4.1 tiled GEMM");
  return acc;
}

CDL_HD inline void student_store([[maybe_unused]] float* c, [[maybe_unused]] GemmShape s,
                                 [[maybe_unused]] int bx, [[maybe_unused]] int by,
                                 [[maybe_unused]] int tx, [[maybe_unused]] int ty,
                                 [[maybe_unused]] float acc) {
  CDL_HD_TODO("4.1 tiled GEMM");
}

}  // namespace concurdl::gpu
