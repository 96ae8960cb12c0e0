// Index and launch arithmetic of chapter 04's kernels, as __host__ __device__ functions: the
// kernels call them on the GPU, and the tests call them on the CPU (tests/test_index.cpp), so
// that a wrong grid size or an off-by-one in a tile is found on a machine without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "concurdl/core/errors.hpp"

#if defined(__CUDACC__)
#define CDL_HD __host__ __device__
#else
#define CDL_HD
#endif

// A loop of a fixed count unrolled by nvcc (host compilers unroll such loops themselves).
#if defined(__CUDACC__)
#define CDL_UNROLL _Pragma("unroll")
#else
#define CDL_UNROLL
#endif

// An exercise stub in __host__ __device__ code: on the CPU it is CDL_TODO (the tests skip it as
// "not attempted"); on the GPU a trap, never reached (only code whose tests passed is timed).
#if defined(__CUDA_ARCH__)
#define CDL_HD_TODO(exercise) __trap()
#else
#define CDL_HD_TODO(exercise) CDL_TODO(exercise)
#endif

namespace concurdl::gpu {

// ceil(a / b) for b > 0.
CDL_HD constexpr std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Blocks for n elements at `per_block` elements a block, at most `max_blocks` (a grid-stride
// loop covers the rest): at least 1, so that a launch for n = 0 is still a valid launch.
CDL_HD constexpr std::size_t grid_blocks(std::size_t n, std::size_t per_block,
                                         std::size_t max_blocks) {
  const std::size_t b = ceil_div(n, per_block);
  return b == 0 ? 1 : (b < max_blocks ? b : max_blocks);
}

// The elements a thread of a grid-stride loop visits: first = its global index, then every
// `stride` = the grid's thread count. How many of the n elements thread `first` visits.
CDL_HD constexpr std::size_t grid_stride_count(std::size_t first, std::size_t stride,
                                               std::size_t n) {
  return first >= n ? 0 : (n - first - 1) / stride + 1;
}

// Floats between the reads of neighbouring threads in the strided copy (copy_strided).
inline constexpr std::size_t kStride = 32;

// The strided copy reads element strided_source(i) for output i: consecutive threads read
// elements `stride` apart (every access of a warp in another 32-byte sector), wrapping around
// n. A permutation of [0, n) when gcd(stride, n) = 1 (the experiment picks n odd and stride a
// power of two).
CDL_HD constexpr std::size_t strided_source(std::size_t i, std::size_t stride, std::size_t n) {
  return static_cast<std::size_t>((static_cast<unsigned long long>(i) * stride) % n);
}

// The tree reductions halve the active threads each step: the steps for a block of `threads`
// (a power of two), and whether thread `tid` adds at step size s.
//   v2 (interleaved, divergent): tid % (2 s) == 0 adds tid + s      (s = 1, 2, 4, ...)
//   v3 (sequential addressing):  tid < s adds tid + s               (s = threads/2, ..., 1)
CDL_HD constexpr bool v2_adds(unsigned tid, unsigned s) { return tid % (2 * s) == 0; }
CDL_HD constexpr bool v3_adds(unsigned tid, unsigned s) { return tid < s; }
CDL_HD constexpr unsigned log2_exact(unsigned threads) {
  unsigned k = 0;
  while ((1u << k) < threads) ++k;
  return k;
}

// The shared-memory bank a 4-byte word at `index` falls in (32 banks of 4 bytes): a warp's
// accesses conflict when two threads touch different words of one bank. A tile of `cols`
// floats per row, read down a column: the bank of row r is (r cols + c) mod 32, all the same
// when cols is a multiple of 32; one word of padding per row (cols + 1) spreads them.
CDL_HD constexpr unsigned bank_of(std::size_t index) { return static_cast<unsigned>(index % 32); }

// The transposes: out (cols x rows) = in (rows x cols)ᵀ, 32 x 32 tiles, a block of 32 x 8
// threads, each thread 4 rows of its tile (y, y + 8, y + 16, y + 24).
//   naive       thread (x, y) reads in[y][x] (coalesced) and writes out[x][y] (32 rows apart)
//   shared      the tile read coalesced into shared memory, then written coalesced from it,
//               read down a column of the tile: 32 threads in one bank
//   padded      the same tile with one float of padding per row: the column read is spread
//               over all 32 banks
inline constexpr int kTransposeTile = 32, kTransposeRows = 8;
// Where thread (tx, ty) of block (bx, by) reads (phase 1) and writes (phase 2) element j of its
// four: the tile's row and column in shared memory, and the global indices.
struct TransposeStep {
  int in_row, in_col;    // read in[in_row][in_col] into tile[ty + 8j][tx]
  int out_row, out_col;  // write out[out_row][out_col] from tile[tx][ty + 8j]
};
CDL_HD inline TransposeStep transpose_step(int bx, int by, int tx, int ty, int j) {
  const int r = ty + kTransposeRows * j;
  return {by * kTransposeTile + r, bx * kTransposeTile + tx, bx * kTransposeTile + r,
          by * kTransposeTile + tx};
}

// ---- the reduction's two register-level steps (reduce.cu; exercise 4.2 writes them again) ----

inline constexpr unsigned kWarpSize = 32;

// Four consecutive floats, 16-byte aligned: one 128-bit load or store on the GPU.
CDL_HD inline void load4(const float* p, float* out) {
#if defined(__CUDA_ARCH__)
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
#else
  std::memcpy(out, p, 4 * sizeof(float));
#endif
}
CDL_HD inline void store4(float* p, const float* in) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
#else
  std::memcpy(p, in, 4 * sizeof(float));
#endif
}

// What one thread of a grid-stride loop sums: in[first], in[first + stride], ... below n.
CDL_HD inline float grid_stride_sum(const float* in, std::size_t n, std::size_t first,
                                    std::size_t stride) {
  float v = 0.0f;
  for (std::size_t i = first; i < n; i += stride) v += in[i];
  return v;
}

// v6's: the same sum read 16 bytes at a time, four loads in flight before the first add (CUB's
// policy for sm_60 and later loads 16 floats a thread a tile, 4 at a time: README.md). Piece p
// is in[4p, 4p + 4); a thread takes pieces first, first + stride, ..., the ones past the last
// multiple of 4 stride singly, and the element pieces 4 + first if that is below n (the n % 4
// past the last piece, one to each of threads 0 .. n % 4 - 1: stride is at least 4). `in`
// 16-byte aligned.
CDL_HD inline float grid_stride_sum4(const float* in, std::size_t n, std::size_t first,
                                     std::size_t stride) {
  const std::size_t pieces = n / 4;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::size_t p = first;
  for (; p + 3 * stride < pieces; p += 4 * stride) {
    float v[4][4];
    CDL_UNROLL
    for (int u = 0; u < 4; ++u) load4(in + 4 * (p + u * stride), v[u]);
    CDL_UNROLL
    for (int u = 0; u < 4; ++u) s[u] += (v[u][0] + v[u][1]) + (v[u][2] + v[u][3]);
  }
  for (; p < pieces; p += stride) {
    float v[4];
    load4(in + 4 * p, v);
    s[0] += (v[0] + v[1]) + (v[2] + v[3]);
  }
  if (pieces * 4 + first < n) s[1] += in[pieces * 4 + first];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// The sum of a warp's 32 values in registers: at each step every lane adds the value of the lane
// `offset` above it, for offsets 16, 8, 4, 2, 1; after the last, lane 0 holds the total (the
// other lanes partial sums). `Warp` gives shfl_down(v, offset), the v of lane + offset (its own
// past lane 31): __shfl_down_sync on the GPU (reduce.cu), on the CPU 32 threads that meet at a
// barrier at every shuffle (tests/warp_sim.hpp). Every lane must take part in every shuffle.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Warp>
CDL_HD float warp_shuffle_sum(Warp& warp, float v) {
  for (unsigned offset = kWarpSize / 2; offset > 0; offset /= 2) v += warp.shfl_down(v, offset);
  return v;
}

}  // namespace concurdl::gpu
