// The GEMM kernels' per-thread work, as __host__ __device__ functions: each kernel in gemm.cu is
// these phases with __shared__ arrays and a __syncthreads() between them, and the tests run the
// same phases on the CPU, every thread of a block in turn and phase by phase (tests/
// test_gemm_tiles.cpp), so a tile index that is off by one fails on a machine without a GPU.
//
// C = A B, row-major: A is M x K, B is K x N, C is M x N. Sizes need not be multiples of a tile:
// loads outside the matrices give 0 and stores outside are skipped.
#pragma once

#include "concurdl/gpu/index.hpp"

namespace concurdl::gpu {

struct GemmShape {
  int m = 0, n = 0, k = 0;
};

// v1 and v2: one thread, one element of C, a dot product over K from global memory.
CDL_HD inline float dot_row_col(const float* a, const float* b, GemmShape s, int row, int col) {
  float acc = 0.0f;
  for (int i = 0; i < s.k; ++i) acc += a[row * s.k + i] * b[i * s.n + col];
  return acc;
}
// v1 (naive): x indexes rows, so the 32 threads of a warp read 32 different rows of A (32
// sectors) and write 32 rows of C. v2 (coalesced): the warp's threads take 32 neighbouring
// columns of one row: B and C accessed in consecutive addresses, A's element broadcast.
CDL_HD inline void v1_coords(int bx, int by, int tx, int ty, int bdx, int bdy, int& row, int& col) {
  row = bx * bdx + tx;
  col = by * bdy + ty;
}
inline constexpr int kV2Tile = 32;
CDL_HD inline void v2_coords(int bx, int by, int tid, int& row, int& col) {
  row = by * kV2Tile + tid / kV2Tile;
  col = bx * kV2Tile + tid % kV2Tile;
}

// v3: 32 x 32 tiles of A and B in shared memory, a 32 x 32 block of threads, one element of C
// each. Per K tile: every thread loads one element of each tile (coalesced), then every thread
// accumulates 32 products from shared memory. Each global element is read 32 times fewer.
inline constexpr int kV3Tile = 32;
CDL_HD inline void v3_load(const float* a, const float* b, GemmShape s, int bx, int by, int t,
                           int tx, int ty, float* as, float* bs) {
  const int row = by * kV3Tile + ty, col = bx * kV3Tile + tx;
  const int ka = t * kV3Tile + tx, kb = t * kV3Tile + ty;
  as[ty * kV3Tile + tx] = row < s.m && ka < s.k ? a[row * s.k + ka] : 0.0f;
  bs[ty * kV3Tile + tx] = kb < s.k && col < s.n ? b[kb * s.n + col] : 0.0f;
}
CDL_HD inline float v3_accumulate(const float* as, const float* bs, int tx, int ty, float acc) {
  for (int i = 0; i < kV3Tile; ++i) acc += as[ty * kV3Tile + i] * bs[i * kV3Tile + tx];
  return acc;
}
CDL_HD inline void v3_store(float* c, GemmShape s, int bx, int by, int tx, int ty, float acc) {
  const int row = by * kV3Tile + ty, col = bx * kV3Tile + tx;
  if (row < s.m && col < s.n) c[row * s.n + col] = acc;
}

// v4: register blocking. A block computes a 64 x 64 tile of C with 64 threads, each an 8 x 8
// sub-tile held in registers; per K step of 8 it loads a 64 x 8 tile of A and an 8 x 64 tile of
// B, then each thread reads 8 values of A and 8 of B from shared memory for 64 multiply-adds
// (v3: 2 shared reads per multiply-add).
inline constexpr int kBM = 64, kBN = 64, kBK = 8, kTM = 8, kTN = 8;
inline constexpr int kV4Threads = (kBM / kTM) * (kBN / kTN);  // 64
CDL_HD inline void v4_load(const float* a, const float* b, GemmShape s, int bx, int by, int t,
                           int tid, float* as, float* bs) {
  for (int i = tid; i < kBM * kBK; i += kV4Threads) {
    const int r = i / kBK, c = i % kBK;
    const int row = by * kBM + r, ka = t * kBK + c;
    as[r * kBK + c] = row < s.m && ka < s.k ? a[row * s.k + ka] : 0.0f;
  }
  for (int i = tid; i < kBK * kBN; i += kV4Threads) {
    const int r = i / kBN, c = i % kBN;
    const int kb = t * kBK + r, col = bx * kBN + c;
    bs[r * kBN + c] = kb < s.k && col < s.n ? b[kb * s.n + col] : 0.0f;
  }
}
CDL_HD inline void v4_accumulate(const float* as, const float* bs, int tid, float* acc) {
  const int tr = tid / (kBN / kTN), tc = tid % (kBN / kTN);
  for (int k = 0; k < kBK; ++k) {
    float ra[kTM], rb[kTN];
    for (int i = 0; i < kTM; ++i) ra[i] = as[(tr * kTM + i) * kBK + k];
    for (int j = 0; j < kTN; ++j) rb[j] = bs[k * kBN + tc * kTN + j];
    for (int i = 0; i < kTM; ++i)
      for (int j = 0; j < kTN; ++j) acc[i * kTN + j] += ra[i] * rb[j];
  }
}
CDL_HD inline void v4_store(float* c, GemmShape s, int bx, int by, int tid, const float* acc) {
  const int tr = tid / (kBN / kTN), tc = tid % (kBN / kTN);
  for (int i = 0; i < kTM; ++i)
    for (int j = 0; j < kTN; ++j) {
      const int row = by * kBM + tr * kTM + i, col = bx * kBN + tc * kTN + j;
      if (row < s.m && col < s.n) c[row * s.n + col] = acc[i * kTN + j];
    }
}

}  // namespace concurdl::gpu
