// The GEMM kernels' per-thread phases (gemm_tiles.hpp) run on the CPU exactly as a block runs
// them on the GPU: every thread's load, then (the __syncthreads) every thread's accumulate, tile
// after tile, then every thread's store. The result must be the CPU's product, for shapes that
// are and are not multiples of the tiles. Small integers make every product exact.
//   ch04_tests --gtest_filter='GemmTiles*'
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/gemm_warp_tiles.hpp"
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

// v6 and v7 as the kernels run them, with (`vec`) and without 128-bit accesses; vec only where
// the launcher takes it (N and K multiples of 4). `double_buffered`: v7's order, step t + 1's
// loads into every thread's registers before step t's multiply-adds, stored to the other buffer
// after them.
void run_warp_tiles(const float* a, const float* b, float* c, GemmShape s, bool vec,
                    bool double_buffered) {
  std::vector<float> as[2] = {std::vector<float>(kWBK * kWBM), std::vector<float>(kWBK * kWBM)};
  std::vector<float> bs[2] = {std::vector<float>(kWBK * kWBN), std::vector<float>(kWBK * kWBN)};
  std::vector<WarpTileLoads> regs(kWThreads);
  const int tiles = static_cast<int>(ceil_div(s.k, kWBK));
  for (int bx = 0; bx * kWBN < s.n; ++bx)
    for (int by = 0; by * kWBM < s.m; ++by) {
      std::vector<std::vector<float>> acc(kWThreads, std::vector<float>(kWTM * kWTN, 0.0f));
      const auto fetch = [&](int t) {
        for (int tid = 0; tid < kWThreads; ++tid) w_fetch(a, b, s, bx, by, t, tid, vec, regs[tid]);
      };
      const auto stash = [&](int buf) {
        for (int tid = 0; tid < kWThreads; ++tid)
          w_stash(regs[tid], tid, as[buf].data(), bs[buf].data());
      };
      const auto multiply = [&](int buf) {
        for (int tid = 0; tid < kWThreads; ++tid)
          w_accumulate(as[buf].data(), bs[buf].data(), tid, acc[tid].data());
      };
      if (double_buffered) {
        fetch(0);
        stash(0);
        for (int t = 0; t < tiles; ++t) {
          if (t + 1 < tiles) fetch(t + 1);
          multiply(t & 1);
          if (t + 1 < tiles) stash((t & 1) ^ 1);
        }
      } else {
        for (int t = 0; t < tiles; ++t) {
          fetch(t);
          stash(0);
          multiply(0);
        }
      }
      for (int tid = 0; tid < kWThreads; ++tid) w_store(c, s, bx, by, tid, vec, acc[tid].data());
    }
}

TEST(GemmTiles, V6AndV7WarpTilesGiveTheProduct) {
  for (const bool double_buffered : {false, true}) {
    const char* version = double_buffered ? "v7" : "v6";
    check([&](const float* a, const float* b, float* c,
              GemmShape s) { run_warp_tiles(a, b, c, s, false, double_buffered); },
          version);
    // 128-bit loads as the launcher takes them: N and K multiples of 4, partial tiles too.
    for (const GemmShape s : {GemmShape{64, 64, 8}, GemmShape{128, 64, 96}, GemmShape{200, 132, 36},
                              GemmShape{256, 384, 48}, GemmShape{5, 4, 4}}) {
      SCOPED_TRACE(::testing::Message()
                   << version << " vec " << s.m << " x " << s.n << " x " << s.k);
      const auto a = small_integers(static_cast<std::size_t>(s.m) * s.k, 1);
      const auto b = small_integers(static_cast<std::size_t>(s.k) * s.n, 2);
      std::vector<float> c(static_cast<std::size_t>(s.m) * s.n, -999.0f);
      run_warp_tiles(a.data(), b.data(), c.data(), s, true, double_buffered);
      ASSERT_EQ(c, gemm_ref(a, b, s.m, s.n, s.k));
    }
  }
}

// Each thread's 8 x 8 values are distinct and together cover the 128 x 128 tile once; a warp's
// 32 threads read 8 neighbouring 4-float pieces of A's row of shared memory and 4 of B's.
TEST(GemmTiles, V6ThreadsCoverTheTileOnceAndAWarpReadsNeighbouringPieces) {
  std::vector<int> seen(kWBM * kWBN, 0);
  for (int tid = 0; tid < kWThreads; ++tid)
    for (int i = 0; i < kWTM; ++i)
      for (int j = 0; j < kWTN; ++j) ++seen[w_row(tid, i) * kWBN + w_col(tid, j)];
  for (const int n : seen) ASSERT_EQ(n, 1);
  for (int warp = 0; warp < kWThreads / 32; ++warp) {
    std::set<int> rows, cols;
    for (int lane = 0; lane < 32; ++lane) {
      rows.insert(w_row(warp * 32 + lane, 0));
      cols.insert(w_col(warp * 32 + lane, 0));
    }
    EXPECT_EQ(rows.size(), 8u);
    EXPECT_EQ(*rows.rbegin() - *rows.begin(), 28) << "8 pieces of 4 floats, side by side";
    EXPECT_EQ(cols.size(), 4u);
    EXPECT_EQ(*cols.rbegin() - *cols.begin(), 12);
  }
  EXPECT_EQ(kWThreads * kWTM * kWTN, kWBM * kWBN);
}

}  // namespace
