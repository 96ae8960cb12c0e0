// GEMM v6 and v7's per-thread work, as __host__ __device__ functions (gemm_tiles.hpp has v1-v4's):
// gemm.cu's kernels are these phases with __shared__ arrays and __syncthreads() between them, and
// tests/test_gemm_tiles.cpp runs the same phases on the CPU, every thread of a block in turn, in
// the kernels' order.
//
// v6 (warp tiles): a block of 256 threads computes a 128 x 128 tile of C, K in steps of 16. A
// warp owns a 64 x 32 part of it and a thread an 8 x 8 part, as two 4-row by two 4-column
// pieces 32 rows and 16 columns apart, so that a warp's reads of a step's 8 values of A and 8 of
// B are 128-bit loads of neighbouring addresses that most threads share (a broadcast, no bank
// conflicts). A is stored transposed in shared memory (K major) for that. Global memory is read
// 128 bits at a time (float4) where the rows allow it (K and N multiples of 4, 16-byte aligned
// matrices), and C written the same way.
// v7 (double buffered): v6 with two buffers of shared memory; a thread loads step t + 1's values
// into registers before it multiplies step t's, so the global loads are in flight during the
// multiply-adds, and one __syncthreads() a step instead of two.
//
// C = A B row-major, A m x k, B k x n, any sizes: loads outside the matrices give 0 and stores
// outside are skipped.
#pragma once

#include <cstddef>

#include "concurdl/gpu/gemm_tiles.hpp"

namespace concurdl::gpu {

inline constexpr int kWBM = 128, kWBN = 128, kWBK = 16;
inline constexpr int kWThreads = 256;                        // 8 warps: 2 rows of 4
inline constexpr int kWarpRows = 64, kWarpCols = 32;         // a warp's part of the block's tile
inline constexpr int kWTM = 8, kWTN = 8;                     // a thread's part
inline constexpr int kWLoads = kWBM * kWBK / 4 / kWThreads;  // float4s of A (and of B) a thread

// A thread's share of one K step's tiles, held in registers between the global load and the
// store to shared memory (v7 holds the next step's there while it multiplies).
struct WarpTileLoads {
  float a[kWLoads][4];
  float b[kWLoads][4];
};

// Four values of a row from `p`, those at or past `end` (the row's length) 0; `vec`: the row's
// length is a multiple of 4 and p 16-byte aligned, so the four are in or out together.
CDL_HD inline void load_row4(const float* p, int first, int end, bool vec, float* out) {
  if (vec && first < end) {
    load4(p + first, out);
    return;
  }
  CDL_UNROLL
  for (int e = 0; e < 4; ++e) out[e] = first + e < end ? p[first + e] : 0.0f;
}

// Step t's tiles from global memory into registers: A's 128 x 16 as 512 float4s of 4
// consecutive k (thread tid takes numbers tid and tid + 256: row idx / 4, k (idx % 4) 4), B's
// 16 x 128 as 512 float4s along a row (k idx / 32, column (idx % 32) 4). Consecutive threads
// read consecutive addresses of B, and of A 4 threads a row.
CDL_HD inline void w_fetch(const float* a, const float* b, GemmShape s, int bx, int by, int t,
                           int tid, bool vec, WarpTileLoads& r) {
  const int k0 = t * kWBK;
  CDL_UNROLL
  for (int p = 0; p < kWLoads; ++p) {
    const int idx = tid + p * kWThreads;
    const int row = by * kWBM + idx / 4;
    if (row < s.m)
      load_row4(a + static_cast<std::size_t>(row) * s.k, k0 + idx % 4 * 4, s.k, vec, r.a[p]);
    else
      r.a[p][0] = r.a[p][1] = r.a[p][2] = r.a[p][3] = 0.0f;
    const int kb = k0 + idx / 32;
    if (kb < s.k)
      load_row4(b + static_cast<std::size_t>(kb) * s.n, bx * kWBN + idx % 32 * 4, s.n, vec, r.b[p]);
    else
      r.b[p][0] = r.b[p][1] = r.b[p][2] = r.b[p][3] = 0.0f;
  }
}

// The registers into shared memory: A transposed (as[k][row], 128 floats a k), B as it is
// (bs[k][column]).
CDL_HD inline void w_stash(const WarpTileLoads& r, int tid, float* as, float* bs) {
  CDL_UNROLL
  for (int p = 0; p < kWLoads; ++p) {
    const int idx = tid + p * kWThreads;
    const int row = idx / 4, k = idx % 4 * 4;
    CDL_UNROLL
    for (int e = 0; e < 4; ++e) as[(k + e) * kWBM + row] = r.a[p][e];
    store4(bs + idx / 32 * kWBN + idx % 32 * 4, r.b[p]);
  }
}

// Where thread tid's values sit in the block's tile: its warp (2 rows of 4 warps), and in the
// warp's 64 x 32 part its lane (8 rows of 4): its rows are the 4 from (lane / 4) 4 and the 4
// from 32 below them, its columns the 4 from (lane % 4) 4 and the 4 from 16 to their right.
CDL_HD inline int w_row(int tid, int i) {
  const int warp = tid / 32, lane = tid % 32;
  return warp / 4 * kWarpRows + i / 4 * 32 + lane / 4 * 4 + i % 4;
}
CDL_HD inline int w_col(int tid, int j) {
  const int warp = tid / 32, lane = tid % 32;
  return warp % 4 * kWarpCols + j / 4 * 16 + lane % 4 * 4 + j % 4;
}

// One K step's 16 outer products: per k, 8 values of A and 8 of B in two 128-bit loads each,
// then 64 multiply-adds into acc (kWTM x kWTN, row-major).
CDL_HD inline void w_accumulate(const float* as, const float* bs, int tid, float* acc) {
  const int r0 = w_row(tid, 0), c0 = w_col(tid, 0);
  CDL_UNROLL
  for (int k = 0; k < kWBK; ++k) {
    float ra[kWTM], rb[kWTN];
    load4(as + k * kWBM + r0, ra);
    load4(as + k * kWBM + r0 + 32, ra + 4);
    load4(bs + k * kWBN + c0, rb);
    load4(bs + k * kWBN + c0 + 16, rb + 4);
    CDL_UNROLL
    for (int i = 0; i < kWTM; ++i) {
      CDL_UNROLL
      for (int j = 0; j < kWTN; ++j) acc[i * kWTN + j] += ra[i] * rb[j];
    }
  }
}

// acc into C, four columns at a time (one 128-bit store where `vec` and the four are inside).
CDL_HD inline void w_store(float* c, GemmShape s, int bx, int by, int tid, bool vec,
                           const float* acc) {
  CDL_UNROLL
  for (int i = 0; i < kWTM; ++i) {
    const int row = by * kWBM + w_row(tid, i);
    if (row >= s.m) continue;
    float* crow = c + static_cast<std::size_t>(row) * s.n;
    CDL_UNROLL
    for (int q = 0; q < kWTN; q += 4) {
      const int col = bx * kWBN + w_col(tid, q);
      if (vec && col < s.n) {
        store4(crow + col, acc + i * kWTN + q);
      } else {
        CDL_UNROLL
        for (int e = 0; e < 4; ++e)
          if (col + e < s.n) crow[col + e] = acc[i * kWTN + q + e];
      }
    }
  }
}

}  // namespace concurdl::gpu
