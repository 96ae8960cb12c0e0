// The GEMM kernels' per-thread phases (gemm_tiles.hpp) run on the CPU exactly as a block runs
// them on the GPU: every thread's load, then (the __syncthreads) every thread's accumulate, tile
// after tile, then every thread's store. The result must be the CPU's product, for shapes that
// are and are not multiples of the tiles. Small integers make every product exact.
//   ch04_tests --gtest_filter='GemmTiles*'
#include <gtest/gtest.h>

#include <vector>

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/reference.hpp"

namespace {

using namespace concurdl::gpu;

const GemmShape kShapes[] = {{1, 1, 1},   {5, 7, 3},     {32, 32, 32}, {33, 65, 31},
                             {64, 64, 8}, {70, 130, 17}, {128, 64, 96}};

template <class Run>
void check(Run run, const char* version) {
  for (const GemmShape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << version << " " << s.m << " x " << s.n << " x " << s.k);
    const auto a = small_integers(static_cast<std::size_t>(s.m) * s.k, 1);
    const auto b = small_integers(static_cast<std::size_t>(s.k) * s.n, 2);
    std::vector<float> c(static_cast<std::size_t>(s.m) * s.n, -999.0f);
    run(a.data(), b.data(), c.data(), s);
    ASSERT_EQ(c, gemm_ref(a, b, s.m, s.n, s.k));
  }
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
  check(
      [](const float* a, const float* b, float* c, GemmShape s) {
        std::vector<float> as(kV3Tile * kV3Tile), bs(kV3Tile * kV3Tile);
        for (int bx = 0; bx * kV3Tile < s.n; ++bx)
          for (int by = 0; by * kV3Tile < s.m; ++by) {
            std::vector<float> acc(kV3Tile * kV3Tile, 0.0f);
            for (int t = 0; t * kV3Tile < s.k; ++t) {
              for (int ty = 0; ty < kV3Tile; ++ty)
                for (int tx = 0; tx < kV3Tile; ++tx)
                  v3_load(a, b, s, bx, by, t, tx, ty, as.data(), bs.data());
              for (int ty = 0; ty < kV3Tile; ++ty)
                for (int tx = 0; tx < kV3Tile; ++tx)
                  acc[ty * kV3Tile + tx] =
                      v3_accumulate(as.data(), bs.data(), tx, ty, acc[ty * kV3Tile + tx]);
            }
            for (int ty = 0; ty < kV3Tile; ++ty)
              for (int tx = 0; tx < kV3Tile; ++tx)
                v3_store(c, s, bx, by, tx, ty, acc[ty * kV3Tile + tx]);
          }
      },
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
