// The kernels' index arithmetic (index.hpp), on the CPU: every element covered exactly once by
// a grid-stride loop, the strided copy a permutation, the two tree reductions simulated on a
// block of values exactly as the kernels step through them, and the bank arithmetic behind the
// padded transpose tile.
//   ch04_tests --gtest_filter='Index*'
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/reference.hpp"

namespace {

using namespace concurdl::gpu;

TEST(Index, GridBlocksCoverNAndStayWithinTheCap) {
  EXPECT_EQ(grid_blocks(0, 256, 100), 1u);  // a launch for nothing is still a launch
  EXPECT_EQ(grid_blocks(1, 256, 100), 1u);
  EXPECT_EQ(grid_blocks(256, 256, 100), 1u);
  EXPECT_EQ(grid_blocks(257, 256, 100), 2u);
  EXPECT_EQ(grid_blocks(1'000'000, 256, 100), 100u);
  EXPECT_EQ(ceil_div(10, 3), 4u);
}

// Simulate every thread of a grid-stride loop: each element exactly once.
TEST(Index, AGridStrideLoopVisitsEveryElementOnce) {
  for (const std::size_t n : {0ul, 1ul, 255ul, 256ul, 257ul, 10'000ul, 65'537ul}) {
    for (const std::size_t blocks : {1ul, 3ul, 8ul}) {
      const std::size_t threads = blocks * 256;
      std::vector<int> hits(n, 0);
      std::size_t counted = 0;
      for (std::size_t t = 0; t < threads; ++t) {
        for (std::size_t i = t; i < n; i += threads) ++hits[i];
        counted += grid_stride_count(t, threads, n);
      }
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n " << n << " element " << i;
      EXPECT_EQ(counted, n) << "grid_stride_count, n " << n << ", " << blocks << " blocks";
    }
  }
}

// v6's loop: every thread's 16-byte pieces and its share of the n % 4 left over read every
// element once, for n below, at and above whole rounds of four loads a thread.
TEST(Index, TheVectorisedGridStrideSumReadsEveryElementOnce) {
  for (const std::size_t threads : {256ul, 512ul, 1024ul}) {
    for (const std::size_t n : {0ul, 1ul, 3ul, 4ul, 7ul, 1023ul, 1024ul, 4 * 1024ul + 3,
                                16 * 1024ul, 16 * 1024ul + 5, 100'003ul}) {
      // Positive integers: a missed or doubled element changes the sum, and every thread's
      // partial sum stays an integer below 2^24, exact in float.
      // 16-byte aligned (operator new's), and room past n that must not count.
      std::vector<float> x(n + 4);
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = i < n ? static_cast<float>(1u << (i % 16)) : 1e9f;
      double got = 0, want = 0;
      for (std::size_t i = 0; i < n; ++i) want += x[i];
      for (std::size_t t = 0; t < threads; ++t) got += grid_stride_sum4(x.data(), n, t, threads);
      EXPECT_EQ(got, want) << "n " << n << ", " << threads << " threads";
    }
  }
}

TEST(Index, TheStridedCopyReadsEveryElementOnceForOddN) {
  for (const std::size_t n : {1ul, 33ul, 1001ul, 65'537ul}) {
    std::set<std::size_t> seen;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t s = strided_source(i, 32, n);
      ASSERT_LT(s, n);
      seen.insert(s);
    }
    EXPECT_EQ(seen.size(), n) << "n " << n;
  }
  EXPECT_EQ(strided_source(1, 32, 1001), 32u);  // neighbouring threads read 32 floats apart
}

// The two shared-memory trees, step by step as the kernels run them (all threads of a step
// read before any writes: the __syncthreads between steps), give the block's sum.
template <class Adds>
float simulate_tree(std::vector<float> s, bool sequential, Adds adds) {
  const auto threads = static_cast<unsigned>(s.size());
  std::vector<unsigned> steps;
  for (unsigned k = 0; k < log2_exact(threads); ++k) steps.push_back(1u << k);
  if (sequential) std::reverse(steps.begin(), steps.end());
  for (const unsigned step : steps) {
    const std::vector<float> before = s;
    for (unsigned tid = 0; tid < threads; ++tid)
      if (adds(tid, step)) s[tid] = before[tid] + before[tid + step];
  }
  return s[0];
}

TEST(Index, BothTreeReductionsSumTheBlock) {
  for (const unsigned threads : {32u, 64u, 256u, 1024u}) {
    std::vector<float> v(threads);
    for (unsigned i = 0; i < threads; ++i) v[i] = static_cast<float>(i % 7) - 3.0f;  // exact
    float want = 0;
    for (const float x : v) want += x;
    EXPECT_EQ(simulate_tree(v, false, v2_adds), want) << threads;
    EXPECT_EQ(simulate_tree(v, true, v3_adds), want) << threads;
  }
  EXPECT_EQ(log2_exact(256), 8u);
  // v2 keeps every 2s-th thread: at step 1 the even threads of each warp, half of it idle
  // but the warp still scheduled; v3 keeps threads 0..s-1, whole warps retiring.
  unsigned v2_active_warps = 0, v3_active_warps = 0;
  for (unsigned w = 0; w < 8; ++w) {
    bool a2 = false, a3 = false;
    for (unsigned lane = 0; lane < 32; ++lane) {
      a2 |= v2_adds(w * 32 + lane, 16);
      a3 |= v3_adds(w * 32 + lane, 16);
    }
    v2_active_warps += a2;
    v3_active_warps += a3;
  }
  EXPECT_EQ(v2_active_warps, 8u);  // at step 16 every warp still has work
  EXPECT_EQ(v3_active_warps, 1u);  // only the first
}

// A 32 x 32 tile read down a column: one bank for every row without padding (a 32-way
// conflict), a different bank per row with one word of padding.
TEST(Index, PaddingATileRowSpreadsAColumnOverTheBanks) {
  std::set<unsigned> plain, padded;
  for (std::size_t row = 0; row < 32; ++row) {
    plain.insert(bank_of(row * 32 + 5));
    padded.insert(bank_of(row * 33 + 5));
  }
  EXPECT_EQ(plain.size(), 1u);
  EXPECT_EQ(padded.size(), 32u);
}

}  // namespace

namespace {

// The tiled transpose's two phases on the CPU, every thread of every block: read into the tile,
// then (the barrier) write out of it. The result is the transpose, for shapes that are and are
// not multiples of the tile; every element of out written once.
TEST(Index, TheTiledTransposeStepsGiveTheTranspose) {
  using namespace concurdl::gpu;
  for (const auto& [rows, cols] :
       std::vector<std::pair<int, int>>{{1, 1}, {32, 32}, {33, 70}, {64, 31}, {100, 3}}) {
    std::vector<float> in(static_cast<std::size_t>(rows) * cols);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
    std::vector<float> out(in.size(), -1.0f);
    std::vector<int> writes(in.size(), 0);
    const int bxs = static_cast<int>(ceil_div(cols, kTransposeTile));
    const int bys = static_cast<int>(ceil_div(rows, kTransposeTile));
    for (int bx = 0; bx < bxs; ++bx)
      for (int by = 0; by < bys; ++by) {
        std::vector<float> tile(kTransposeTile * (kTransposeTile + 1), -2.0f);
        const int pitch = kTransposeTile + 1;
        for (int ty = 0; ty < kTransposeRows; ++ty)
          for (int tx = 0; tx < kTransposeTile; ++tx)
            for (int j = 0; j < kTransposeTile / kTransposeRows; ++j) {
              const TransposeStep s = transpose_step(bx, by, tx, ty, j);
              if (s.in_row < rows && s.in_col < cols)
                tile[(ty + kTransposeRows * j) * pitch + tx] = in[s.in_row * cols + s.in_col];
            }
        for (int ty = 0; ty < kTransposeRows; ++ty)
          for (int tx = 0; tx < kTransposeTile; ++tx)
            for (int j = 0; j < kTransposeTile / kTransposeRows; ++j) {
              const TransposeStep s = transpose_step(bx, by, tx, ty, j);
              if (s.out_row < cols && s.out_col < rows) {
                out[s.out_row * rows + s.out_col] = tile[tx * pitch + ty + kTransposeRows * j];
                ++writes[s.out_row * rows + s.out_col];
              }
            }
      }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        ASSERT_EQ(out[c * rows + r], in[r * cols + c])
            << rows << " x " << cols << " at " << r << ", " << c;
        ASSERT_EQ(writes[c * rows + r], 1);
      }
  }
}

}  // namespace
