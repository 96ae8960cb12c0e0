// GEMM v3: cache blocking (v4, in gemm_blocked.cpp, adds packed panels and a register tile).
#include <algorithm>
#include <cstddef>

#include "gemm_impl.hpp"

namespace concurdl::kernels::detail {

// v3: cache blocking. The i-k-j loops of v2, run over blocks: a KB x NB block of B (256 KiB)
// stays in L2 while MB rows of A use it, and the NB-wide row of C being updated stays in L1.
// v2 streams all of B from memory once per row of C; v3 once per MB rows. How much that buys
// depends on where v2's B came from: on a server whose L3 holds B (n = 1024 is 4 MiB) v2 reads
// it at L3 speed and v3 gains little, because both are then held back by the inner loop
// itself: a load and a store of C for every multiply-add. v4 keeps C in registers instead.
// Block sizes: MB, KB and NB from 16 to 256 (B blocks of 64 KiB to 512 KiB) measured within
// 10 % of each other at n = 1024 on Sapphire Rapids.
namespace {
constexpr std::size_t kV3RowsA = 64;   // MB
constexpr std::size_t kV3Depth = 128;  // KB
constexpr std::size_t kV3Cols = 512;   // NB

template <Trans TA, Trans TB>
void v3_blocks(const GemmArgs& g) {
  scale_c(g);
  for (std::size_t i0 = 0; i0 < g.m; i0 += kV3RowsA) {
    const std::size_t i1 = std::min(g.m, i0 + kV3RowsA);
    for (std::size_t p0 = 0; p0 < g.k; p0 += kV3Depth) {
      const std::size_t p1 = std::min(g.k, p0 + kV3Depth);
      for (std::size_t j0 = 0; j0 < g.n; j0 += kV3Cols) {
        const std::size_t j1 = std::min(g.n, j0 + kV3Cols);
        for (std::size_t i = i0; i < i1; ++i) {
          float* __restrict crow = g.c + i * g.ldc;
          for (std::size_t p = p0; p < p1; ++p) {
            const float aip = g.alpha * (TA == Trans::no ? g.a[i * g.lda + p] : g.a[p * g.lda + i]);
            if constexpr (TB == Trans::no) {
              const float* __restrict brow = g.b + p * g.ldb;
              for (std::size_t j = j0; j < j1; ++j) crow[j] += aip * brow[j];
            } else {
              for (std::size_t j = j0; j < j1; ++j) crow[j] += aip * g.b[j * g.ldb + p];
            }
          }
        }
      }
    }
  }
}
}  // namespace

void gemm_v3(const GemmArgs& g) {
  if (g.ta == Trans::no)
    g.tb == Trans::no ? v3_blocks<Trans::no, Trans::no>(g) : v3_blocks<Trans::no, Trans::yes>(g);
  else
    g.tb == Trans::no ? v3_blocks<Trans::yes, Trans::no>(g) : v3_blocks<Trans::yes, Trans::yes>(g);
}

}  // namespace concurdl::kernels::detail
