// Chapter 04's exercises through the checks their references pass, on the CPU (the phases are
// __host__ __device__: what runs here is what the GPU runs). Each suite is typed over the
// chapter's own code and the student's; while a stub still has CDL_HD_TODO, its tests are
// skipped as "not attempted". Every test runs under a deadline (finishes_within).
//   4.1 v3's phases vs student_load / student_accumulate / student_store
//       (exercises/student_tiled_gemm.hpp)   ch04_tests --gtest_filter='TiledGemmEx4_1/student.*'
//   4.2 grid_stride_sum and warp_shuffle_sum vs student_thread_sum and student_warp_sum
//       (exercises/student_warp_sum.hpp)     ch04_tests --gtest_filter='WarpSumEx4_2/student.*'
// (what `concurdl exercise ch04` runs; '*Ex4*' runs the references' instances too). On a GPU,
// `concurdl exercise ch04` then times the student's kernels against the chapter's.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "../exercises/student_tiled_gemm.hpp"
#include "../exercises/student_warp_sum.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/reference.hpp"
#include "tile_sim.hpp"
#include "warp_sim.hpp"

namespace {

using namespace concurdl::gpu;
using concurdl::testing::finishes_within;

constexpr int kDeadline = 60;

// --- 4.1 the tiled GEMM -------------------------------------------------------------------------

struct ReferenceTiles {
  static constexpr int kTile = kV3Tile;
  static void multiply(const float* a, const float* b, float* c, GemmShape s) {
    sim::run_tiled<kTile>(a, b, c, s, v3_load, v3_accumulate, v3_store);
  }
};
struct StudentTiles {
  static constexpr int kTile = kStudentTile;
  static void multiply(const float* a, const float* b, float* c, GemmShape s) {
    sim::run_tiled<kTile>(a, b, c, s, student_load, student_accumulate, student_store);
  }
};

// --- 4.2 the warp-shuffle reduction
// ---------------------------------------------------------------

struct ReferenceSums {
  static float thread_sum(const float* in, std::size_t n, std::size_t thread, std::size_t threads) {
    return grid_stride_sum(in, n, thread, threads);
  }
  static float warp_sum(sim::CpuWarp& warp, float v) { return warp_shuffle_sum(warp, v); }
};
struct StudentSums {
  static float thread_sum(const float* in, std::size_t n, std::size_t thread, std::size_t threads) {
    return student_thread_sum(in, n, thread, threads);
  }
  static float warp_sum(sim::CpuWarp& warp, float v) { return student_warp_sum(warp, v); }
};

// The instances are named "reference" and "student", so that `Suite/student.*` selects the
// student's tests alone.
struct ImplNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, StudentTiles> || std::is_same_v<T, StudentSums> ? "student"
                                                                             : "reference";
  }
};

template <class T>
class TiledGemmEx4_1 : public ::testing::Test {};
using TileImpls = ::testing::Types<ReferenceTiles, StudentTiles>;
TYPED_TEST_SUITE(TiledGemmEx4_1, TileImpls, ImplNames);

TYPED_TEST(TiledGemmEx4_1, EveryShapeGivesTheProduct) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    sim::check_product(TypeParam::multiply, "tiles");
    if (::testing::Test::HasFatalFailure()) throw std::runtime_error("a product differs (above)");
  })));
}

// Each thread's load writes exactly its own element of each tile: no thread's write is lost to
// another's (on the GPU they run at once, in any order).
TYPED_TEST(TiledGemmEx4_1, EachThreadLoadsItsOwnElementOfEachTile) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    constexpr int T = TypeParam::kTile;
    const GemmShape s{2 * T, 2 * T, 2 * T};
    const auto a = small_integers(static_cast<std::size_t>(s.m) * s.k, 1);
    const auto b = small_integers(static_cast<std::size_t>(s.k) * s.n, 2);
    std::vector<int> written_a(T * T), written_b(T * T);
    for (int ty = 0; ty < T; ++ty)
      for (int tx = 0; tx < T; ++tx) {
        std::vector<float> as(T * T, -1e9f), bs(T * T, -1e9f);
        if constexpr (std::is_same_v<TypeParam, StudentTiles>)
          student_load(a.data(), b.data(), s, 1, 0, 1, tx, ty, as.data(), bs.data());
        else
          v3_load(a.data(), b.data(), s, 1, 0, 1, tx, ty, as.data(), bs.data());
        int wrote = 0;
        for (int i = 0; i < T * T; ++i) {
          if (as[i] != -1e9f) ++written_a[i], ++wrote;
          if (bs[i] != -1e9f) ++written_b[i], ++wrote;
        }
        if (wrote != 2)
          throw std::runtime_error("thread (" + std::to_string(tx) + ", " + std::to_string(ty) +
                                   ") wrote " + std::to_string(wrote) +
                                   " elements of the tiles, not one of each");
      }
    for (int i = 0; i < T * T; ++i)
      if (written_a[i] != 1 || written_b[i] != 1)
        throw std::runtime_error("element " + std::to_string(i) +
                                 " of a tile was written by a number of threads other than one");
  })));
}

template <class T>
class WarpSumEx4_2 : public ::testing::Test {};
using SumImpls = ::testing::Types<ReferenceSums, StudentSums>;
TYPED_TEST_SUITE(WarpSumEx4_2, SumImpls, ImplNames);

// Lane 0 ends with the warp's total, for values whose sums are exact in any order.
TYPED_TEST(WarpSumEx4_2, LaneZeroHoldsTheWarpsSum) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    for (int pattern = 0; pattern < 4; ++pattern) {
      sim::WarpValues v{};
      double want = 0;
      for (unsigned lane = 0; lane < kWarpSize; ++lane) {
        v[lane] = pattern == 0   ? static_cast<float>(lane)
                  : pattern == 1 ? (lane == 31 ? 1.0f : 0.0f)  // only the last lane counts
                  : pattern == 2 ? static_cast<float>((lane * 7) % 11) - 5.0f
                                 : static_cast<float>(1u << (lane % 20));
        want += v[lane];
      }
      const sim::WarpValues got = sim::run_warp(v, TypeParam::warp_sum);
      if (static_cast<double>(got[0]) != want)
        throw std::runtime_error("pattern " + std::to_string(pattern) + ": lane 0 holds " +
                                 std::to_string(got[0]) + ", the warp's sum is " +
                                 std::to_string(want));
    }
  })));
}

// Every element is summed by exactly one thread, and neighbouring threads read neighbouring
// elements: weights i + 1 (exact in float here) and, per thread, the first element it read.
TYPED_TEST(WarpSumEx4_2, AGridStrideLoopVisitsEveryElementOnce) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    for (const std::size_t n : {0ul, 1ul, 31ul, 1000ul, 4099ul})
      for (const std::size_t threads : {1ul, 7ul, 32ul, 256ul, 5000ul}) {
        std::vector<float> in(n);
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i + 1);
        double total = 0;
        for (std::size_t t = 0; t < threads; ++t) {
          total += TypeParam::thread_sum(in.data(), n, t, threads);
          // Thread t alone: an array with 1 at index t and 0 elsewhere gives 1 when t < n.
          if (t < n && t < 64) {
            std::vector<float> one(n, 0.0f);
            one[t] = 1.0f;
            if (TypeParam::thread_sum(one.data(), n, t, threads) != 1.0f)
              throw std::runtime_error("thread " + std::to_string(t) + " of " +
                                       std::to_string(threads) + " does not read element " +
                                       std::to_string(t) + " (n " + std::to_string(n) +
                                       "): consecutive threads must read consecutive elements");
          }
        }
        const double want = static_cast<double>(n) * static_cast<double>(n + 1) / 2;
        if (total != want)
          throw std::runtime_error("n " + std::to_string(n) + ", " + std::to_string(threads) +
                                   " threads: the threads' sums add up to " +
                                   std::to_string(total) + ", not " + std::to_string(want));
      }
  })));
}

// The whole kernel simulated: thread sums, then warp sums, lane 0's added up.
TYPED_TEST(WarpSumEx4_2, ThreadAndWarpSumsTogetherGiveTheTotal) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    const std::size_t n = 10'007, threads = 4 * kWarpSize;
    const auto in = small_integers(n, 9);
    double total = 0;
    for (std::size_t w = 0; w < threads / kWarpSize; ++w) {
      sim::WarpValues v{};
      for (unsigned lane = 0; lane < kWarpSize; ++lane)
        v[lane] = TypeParam::thread_sum(in.data(), n, w * kWarpSize + lane, threads);
      total += sim::run_warp(v, TypeParam::warp_sum)[0];
    }
    if (total != sum_ref(in))
      throw std::runtime_error("the kernel's sum is " + std::to_string(total) + ", the CPU's " +
                               std::to_string(sum_ref(in)));
  })));
}

}  // namespace
