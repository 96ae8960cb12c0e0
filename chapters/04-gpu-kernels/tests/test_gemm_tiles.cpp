// The GEMM kernels' per-thread phases (gemm_tiles.hpp) run on the CPU exactly as a block runs
// them on the GPU: every thread's load, then (the __syncthreads) every thread's accumulate, tile
// after tile, then every thread's store. The result must be the CPU's product, for shapes that
// are and are not multiples of the tiles. Small integers make every product exact.
//   ch04_tests --gtest_filter='GemmTiles*'
#include <gtest/gtest.h>

#include <vector>

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/reference.hpp"
#include "tile_sim.hpp"

namespace {

using namespace concurdl::gpu;

using sim::run_tiled;

template <class Run>
void check(Run run, const char* version) {
  sim::check_product(run, version);
}

TEST(GemmTiles, V1AndV2CoordinatesCoverCOnce) {
  check(
      [](const float* a, const float* b, float* c, GemmShape s) {
        const int bdx = 32, bdy = 32;
        for (int bx = 0; bx * bdx < s.m; ++bx)
          for (int by = 0; by * bdy < s.n; ++by)
            for (int tx = 0; tx < bdx; ++tx)
              for (int ty = 0; ty < bdy; ++ty) {
                int row = 0, col = 0;
                v1_coords(bx, by, tx, ty, bdx, bdy, row, col);
                if (row < s.m && col < s.n) c[row * s.n + col] = dot_row_col(a, b, s, row, col);
              }
      },
      "v1");
  check(
      [](const float* a, const float* b, float* c, GemmShape s) {
        for (int bx = 0; bx * kV2Tile < s.n; ++bx)
          for (int by = 0; by * kV2Tile < s.m; ++by)
            for (int tid = 0; tid < kV2Tile * kV2Tile; ++tid) {
              int row = 0, col = 0;
              v2_coords(bx, by, tid, row, col);
              if (row < s.m && col < s.n) c[row * s.n + col] = dot_row_col(a, b, s, row, col);
            }
      },
      "v2");
  // v2's point: the 32 threads of a warp (tid 0..31) share a row and take neighbouring columns.
  int r0 = 0, c0 = 0, r31 = 0, c31 = 0;
  v2_coords(0, 0, 0, r0, c0);
  v2_coords(0, 0, 31, r31, c31);
  EXPECT_EQ(r0, r31);
  EXPECT_EQ(c31 - c0, 31);
}

TEST(GemmTiles, V3SharedTilesGiveTheProduct) {
  check([](const float* a, const float* b, float* c,
           GemmShape s) { run_tiled<kV3Tile>(a, b, c, s, v3_load, v3_accumulate, v3_store); },
        "v3");
}

TEST(GemmTiles, V4RegisterBlockingGivesTheProduct) {
  check(
      [](const float* a, const float* b, float* c, GemmShape s) {
        std::vector<float> as(kBM * kBK), bs(kBK * kBN);
        for (int bx = 0; bx * kBN < s.n; ++bx)
          for (int by = 0; by * kBM < s.m; ++by) {
            std::vector<std::vector<float>> acc(kV4Threads, std::vector<float>(kTM * kTN, 0.0f));
            for (int t = 0; t * kBK < s.k; ++t) {
              for (int tid = 0; tid < kV4Threads; ++tid)
                v4_load(a, b, s, bx, by, t, tid, as.data(), bs.data());
              for (int tid = 0; tid < kV4Threads; ++tid)
                v4_accumulate(as.data(), bs.data(), tid, acc[tid].data());
            }
            for (int tid = 0; tid < kV4Threads; ++tid) v4_store(c, s, bx, by, tid, acc[tid].data());
          }
      },
      "v4");
  EXPECT_EQ(kV4Threads * kTM * kTN, kBM * kBN);  // the threads' sub-tiles cover the block's tile
}

}  // namespace
