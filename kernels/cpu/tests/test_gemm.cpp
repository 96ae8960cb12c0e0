// GEMM: every version against the double reference, over the shapes that break blocked code
// (empty, 1x1x1, odd, non-square, not multiples of the register tile, more than one cache
// block), all four transposes, alpha/beta variants and padded leading dimensions; v4 gives the
// same bits at 1, 2, 3, 4 and 8 threads and from concurrent callers. The epilogues and the
// 16-bit operands: test_gemm_epilogue.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/kernels/fp16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/reference.hpp"
#include "concurdl/kernels/threads.hpp"
#include "gemm_test_util.hpp"

namespace concurdl::kernels {
namespace {

using gemm_test::Case;
using gemm_test::kNaN;
using gemm_test::kSentinel;
using gemm_test::make_operands;
using gemm_test::Operands;
using gemm_test::ThreadsGuard;

// Runs one version on one case and checks it against the reference; "" when right.
std::string run_and_check(GemmVersion v, const Case& t, unsigned seed = 1) {
  Operands o = make_operands(t, seed);
  const GemmReference ref = reference_gemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda,
                                           o.b.data(), o.ldb, t.beta, o.c0.data(), o.ldc);
  gemm(v, t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, t.beta,
       o.c.data(), o.ldc);
  std::string why = check_gemm(ref, o.c.data(), o.ldc);
  for (std::size_t i = 0; i < t.m && why.empty(); ++i)
    for (std::size_t j = t.n; j < o.ldc; ++j)
      if (o.c[i * o.ldc + j] != kSentinel) {
        why = "wrote C's padding at (" + std::to_string(i) + ", " + std::to_string(j) + ")";
        break;
      }
  return why;
}

class GemmVersions : public ::testing::TestWithParam<GemmVersion> {};

std::string version_label(const ::testing::TestParamInfo<GemmVersion>& info) {
  return std::string(gemm_version_name(info.param));
}

const Trans kTrans[2] = {Trans::no, Trans::yes};

// Odd, non-square, thin and tile-edge shapes; the last ones span more than one KC, NC or MC
// block of v4 (K 1100 > 2 x KC, N 600 > 2 x NC, M 2100 > MC on AVX-512).
TEST_P(GemmVersions, MatchesReferenceOnAwkwardShapesAllTransposes) {
  const std::vector<Case> shapes = {{1, 1, 1},      {17, 33, 9},    {127, 5, 300}, {1, 1000, 1},
                                    {1000, 1, 7},   {257, 129, 65}, {15, 33, 1},   {13, 31, 2},
                                    {20, 70, 1100}, {30, 600, 40},  {2100, 40, 20}};
  for (Case t : shapes)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) {
        t.ta = ta;
        t.tb = tb;
        EXPECT_EQ(run_and_check(GetParam(), t), "") << t.describe();
      }
}

TEST_P(GemmVersions, AlphaBetaAndLeadingDimensions) {
  struct AB {
    float alpha, beta;
  };
  const AB abs[] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-2.0f, -0.5f}, {0.5f, 1.0f}, {0.0f, 2.0f}};
  for (const AB ab : abs)
    for (std::size_t pad : {0, 3, 17})
      for (Trans ta : kTrans)
        for (Trans tb : kTrans) {
          const Case t{45, 67, 530, ta, tb, ab.alpha, ab.beta, pad};
          EXPECT_EQ(run_and_check(GetParam(), t, 7), "") << t.describe();
        }
}

// m or n = 0: nothing happens; k = 0: C = beta * C (zeros for beta == 0, even over NaN).
TEST_P(GemmVersions, ZeroDimensions) {
  for (float beta : {0.0f, 1.0f, -0.5f})
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        for (const Case shape :
             {Case{0, 5, 3}, Case{4, 0, 3}, Case{4, 5, 0}, Case{0, 0, 0}, Case{19, 37, 0}}) {
          Case t = shape;
          t.ta = ta;
          t.tb = tb;
          t.beta = beta;
          t.alpha = 1.5f;
          t.pad = 2;
          EXPECT_EQ(run_and_check(GetParam(), t), "") << t.describe();
        }
}

TEST_P(GemmVersions, BadLeadingDimensionThrows) {
  std::vector<float> a(100, 1.0f), b(100, 1.0f), c(100, 0.0f);
  const GemmVersion v = GetParam();
  // A is 4 x 5 (lda >= 5), B is 5 x 6 (ldb >= 6), C is 4 x 6 (ldc >= 6)
  EXPECT_THROW(gemm(v, Trans::no, Trans::no, 4, 6, 5, 1, a.data(), 4, b.data(), 6, 0, c.data(), 6),
               std::invalid_argument);
  EXPECT_THROW(gemm(v, Trans::no, Trans::no, 4, 6, 5, 1, a.data(), 5, b.data(), 5, 0, c.data(), 6),
               std::invalid_argument);
  EXPECT_THROW(gemm(v, Trans::no, Trans::no, 4, 6, 5, 1, a.data(), 5, b.data(), 6, 0, c.data(), 5),
               std::invalid_argument);
  // transposed: A stored 5 x 4 (lda >= 4), B stored 6 x 5 (ldb >= 5)
  EXPECT_THROW(gemm(v, Trans::yes, Trans::no, 4, 6, 5, 1, a.data(), 3, b.data(), 6, 0, c.data(), 6),
               std::invalid_argument);
  EXPECT_THROW(gemm(v, Trans::no, Trans::yes, 4, 6, 5, 1, a.data(), 5, b.data(), 4, 0, c.data(), 6),
               std::invalid_argument);
  EXPECT_NO_THROW(
      gemm(v, Trans::yes, Trans::yes, 4, 6, 5, 1, a.data(), 4, b.data(), 5, 0, c.data(), 6));
}

INSTANTIATE_TEST_SUITE_P(All, GemmVersions, ::testing::ValuesIn(gemm_versions()), version_label);

// The work split depends on the thread count, the arithmetic must not: every element is
// computed by one thread with the same K order. 3 threads gives an uneven grid; 8 is more than
// the cores of most CI machines.
TEST(GemmV4, SameBitsForAnyThreadCount) {
  ThreadsGuard guard;
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      const Case t{100, 300, 700, ta, tb, 0.75f, -0.5f, 1};
      Operands o = make_operands(t, 3);
      std::vector<float> first;
      for (int threads : {1, 2, 3, 4, 8}) {
        set_compute_threads(threads);
        std::vector<float> c = o.c0;
        gemm(GemmVersion::v4_register, ta, tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda,
             o.b.data(), o.ldb, t.beta, c.data(), o.ldc);
        if (first.empty()) {
          first = c;
          continue;
        }
        EXPECT_EQ(std::memcmp(first.data(), c.data(), c.size() * sizeof(float)), 0)
            << t.describe() << ": threads=" << threads << " differs from threads=1";
      }
    }
}

// Two shortcuts of v4 skip a packing copy: A read where it lies when C has few columns, and
// C = A Bᵀ with a batch of rows computed as Cᵀ = B Aᵀ (the forward pass of a training step). A
// row length of 1024 floats turns both off (the rows would alias in the L1), so the same product
// with rows padded to 1024 is the packed computation: the bits must be the same, at any thread
// count. NaN in the padding catches a read past a row.
TEST(GemmV4, ReadingADirectlyAndTheTransposedProductGiveThePackedBits) {
  ThreadsGuard guard;
  const Case cases[] = {
      {64, 256, 784, Trans::no, Trans::yes},  // the MLP's first layer
      {64, 250, 777, Trans::no, Trans::yes},  // ragged columns and depth
      {32, 130, 96, Trans::no, Trans::yes, 0.5f},
      {64, 10, 128, Trans::no, Trans::yes},                // the last layer: one narrow panel
      {128, 10, 2048, Trans::no, Trans::yes},              // narrow, and large enough for a team
      {96, 100, 300, Trans::no, Trans::no, 0.75f},         // A direct, N <= 128
      {128, 64, 200, Trans::no, Trans::yes, 1.0f, 0.5f}};  // beta != 0
  for (const Case& t : cases) {
    const std::size_t a_cols = t.k, b_rows = t.tb == Trans::no ? t.k : t.n,
                      b_cols = t.tb == Trans::no ? t.n : t.k;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> a(t.m * a_cols), b(b_rows * b_cols), c0(t.m * t.n);
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    for (float& x : c0) x = dist(rng);
    auto product = [&](std::size_t ld, int threads) {
      set_compute_threads(threads);
      const std::size_t lda = std::max(ld, a_cols), ldb = std::max(ld, b_cols);
      std::vector<float> pa(t.m * lda, kNaN), pb(b_rows * ldb, kNaN), c = c0;
      for (std::size_t r = 0; r < t.m; ++r)
        std::copy_n(a.data() + r * a_cols, a_cols, pa.data() + r * lda);
      for (std::size_t r = 0; r < b_rows; ++r)
        std::copy_n(b.data() + r * b_cols, b_cols, pb.data() + r * ldb);
      gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, t.alpha, pa.data(), lda, pb.data(),
           ldb, t.beta, c.data(), t.n);
      return c;
    };
    const std::vector<float> packed = product(1024, 1);
    EXPECT_FALSE(std::any_of(packed.begin(), packed.end(), [](float x) { return std::isnan(x); }))
        << t.describe();
    for (int threads : {1, 2, 3}) {
      const std::vector<float> shortcut = product(0, threads);
      EXPECT_EQ(std::memcmp(shortcut.data(), packed.data(), packed.size() * sizeof(float)), 0)
          << t.describe() << ": threads=" << threads;
    }
  }
}

// With a short K and B not transposed (a weight gradient's K is the batch), v4 reads B where it
// lies instead of packing it, float32 or FP16 (widened by the kernel): the same product with B
// stored transposed, which v4 packs, must give the same bits, at 1-3 threads. B's rows are
// padded with NaN, which catches a read past the columns of a row. beta != 0 keeps the
// transposed-B product from being computed as its transpose (another shortcut).
TEST(GemmV4, ReadingBDirectlyGivesThePackedBits) {
  ThreadsGuard guard;
  const Case cases[] = {
      {256, 784, 64, Trans::yes, Trans::no, 1.0f, 0.5f},  // the MLP's first weight gradient
      {64, 256, 128, Trans::no, Trans::no, 1.0f, 0.5f},   // its second input gradient
      {45, 48, 128, Trans::no, Trans::no, 0.75f, -1.0f},  // K at the limit, a half panel
      {30, 80, 7, Trans::yes, Trans::no, 1.0f, 1.0f}};
  for (const Case& t : cases) {
    const std::size_t lda = t.ta == Trans::no ? t.k : t.m, a_rows = t.ta == Trans::no ? t.m : t.k;
    const std::size_t ldb = t.n + 16;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> a(a_rows * lda), b(t.k * ldb, kNaN), bt(t.n * t.k), c0(t.m * t.n);
    for (float& x : a) x = dist(rng);
    for (std::size_t p = 0; p < t.k; ++p)
      for (std::size_t j = 0; j < t.n; ++j) bt[j * t.k + p] = b[p * ldb + j] = dist(rng);
    for (float& x : c0) x = dist(rng);
    for (int threads : {1, 2, 3}) {
      set_compute_threads(threads);
      std::vector<float> direct = c0, packed = c0;
      gemm(GemmVersion::v4_register, t.ta, Trans::no, t.m, t.n, t.k, t.alpha, a.data(), lda,
           b.data(), ldb, t.beta, direct.data(), t.n);
      gemm(GemmVersion::v4_register, t.ta, Trans::yes, t.m, t.n, t.k, t.alpha, a.data(), lda,
           bt.data(), t.k, t.beta, packed.data(), t.n);
      EXPECT_FALSE(std::any_of(direct.begin(), direct.end(), [](float x) { return std::isnan(x); }))
          << t.describe() << ": threads=" << threads;
      EXPECT_EQ(std::memcmp(direct.data(), packed.data(), packed.size() * sizeof(float)), 0)
          << t.describe() << ": threads=" << threads;
      // FP16 operands (gemm_16bit has no alpha: 1).
      std::vector<std::uint16_t> a16(a.size()), b16(b.size()), bt16(bt.size());
      for (std::size_t i = 0; i < a.size(); ++i) a16[i] = to_fp16(a[i]);
      for (std::size_t i = 0; i < b.size(); ++i) b16[i] = to_fp16(b[i]);  // NaN stays NaN
      for (std::size_t i = 0; i < bt.size(); ++i) bt16[i] = to_fp16(bt[i]);
      std::vector<float> direct16 = c0, packed16 = c0;
      gemm_16bit(Half::fp16, t.ta, Trans::no, t.m, t.n, t.k, a16.data(), lda, b16.data(), ldb,
                 t.beta, direct16.data(), t.n);
      gemm_16bit(Half::fp16, t.ta, Trans::yes, t.m, t.n, t.k, a16.data(), lda, bt16.data(), t.k,
                 t.beta, packed16.data(), t.n);
      EXPECT_FALSE(
          std::any_of(direct16.begin(), direct16.end(), [](float x) { return std::isnan(x); }))
          << t.describe() << ": fp16, threads=" << threads;
      EXPECT_EQ(std::memcmp(direct16.data(), packed16.data(), packed16.size() * sizeof(float)), 0)
          << t.describe() << ": fp16, threads=" << threads;
    }
  }
}

// A last panel of C half a tile wide (v4: NR / 2 columns, whole vectors) runs a kernel for just
// those columns: its elements must have the bits they get inside a whole tile. The same product
// with B widened by half a tile of further columns puts them inside one; the first n columns of
// C must agree bit for bit, packed and with A read directly, at 1-3 threads.
TEST(GemmV4, AHalfWidthLastPanelGivesTheBitsOfAWholeTile) {
  ThreadsGuard guard;
  const std::size_t half = gemm_v4_blocking().nr / 2;
  const Case cases[] = {{64, 24 * 2 * half + half, 64, Trans::yes, Trans::no},  // a dW, 784 wide
                        {96, 3 * 2 * half + half, 300, Trans::no, Trans::no, 0.75f},  // A direct
                        {45, 2 * half + half, 530, Trans::no, Trans::yes, 1.0f, 0.5f}};
  for (const Case& t : cases) {
    const std::size_t wide = t.n + half;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> a(t.m * t.k), b(t.k * wide), c0(t.m * wide);
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    for (float& x : c0) x = dist(rng);
    // op(B) is k x n: B itself k x wide (no transpose) or wide x k (transposed); the narrow
    // product's B is the first n columns of op(B), read with the wide leading dimension (no) or
    // the first n rows (yes).
    const std::size_t ldb = t.tb == Trans::no ? wide : t.k;
    const std::size_t lda = t.ta == Trans::no ? t.k : t.m;
    for (int threads : {1, 2, 3}) {
      set_compute_threads(threads);
      std::vector<float> narrow(t.m * wide, kNaN), whole = c0;
      for (std::size_t i = 0; i < t.m; ++i)
        std::copy_n(c0.data() + i * wide, t.n, &narrow[i * wide]);
      gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(),
           ldb, t.beta, narrow.data(), wide);
      gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, wide, t.k, t.alpha, a.data(), lda, b.data(),
           ldb, t.beta, whole.data(), wide);
      for (std::size_t i = 0; i < t.m; ++i) {
        EXPECT_EQ(std::memcmp(&narrow[i * wide], &whole[i * wide], t.n * sizeof(float)), 0)
            << t.describe() << ": threads=" << threads << ", row " << i;
        EXPECT_TRUE(std::isnan(narrow[i * wide + t.n])) << "wrote past C's columns, row " << i;
      }
    }
  }
}

// Two threads of the program call v4 at once, each with a team of its own: packing buffers are
// per thread, nothing else is shared.
TEST(GemmV4, ConcurrentCallersGetTheirOwnResults) {
  ThreadsGuard guard;
  set_compute_threads(2);
  const Case t{160, 192, 160, Trans::no, Trans::yes, 1.0f, 0.0f, 0};  // big enough for a team
  Operands o1 = make_operands(t, 11), o2 = make_operands(t, 12);
  auto solo = [&](Operands& o) {
    std::vector<float> c(o.c0.size());
    gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1, o.a.data(), o.lda, o.b.data(),
         o.ldb, 0, c.data(), o.ldc);
    return c;
  };
  const std::vector<float> want1 = solo(o1), want2 = solo(o2);
  std::vector<float> got1(want1.size()), got2(want2.size());
  bool same1 = true, same2 = true;
  {
    auto caller = [&](Operands& o, std::vector<float>& got, const std::vector<float>& want,
                      bool& same) {
      for (int rep = 0; rep < 5; ++rep) {
        gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1, o.a.data(), o.lda, o.b.data(),
             o.ldb, 0, got.data(), o.ldc);
        same = same && std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
      }
    };
    std::jthread x([&] { caller(o1, got1, want1, same1); });
    std::jthread y([&] { caller(o2, got2, want2, same2); });
  }
  EXPECT_TRUE(same1);
  EXPECT_TRUE(same2);
}

TEST(GemmReference, CheckerNamesTheWorstElement) {
  const Case t{9, 11, 40, Trans::no, Trans::no, 1.0f, 0.0f, 0};
  Operands o = make_operands(t, 5);
  const GemmReference ref = reference_gemm(t.ta, t.tb, t.m, t.n, t.k, 1, o.a.data(), o.lda,
                                           o.b.data(), o.ldb, 0, nullptr, o.ldc);
  gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb,
       0, o.c.data(), o.ldc);
  ASSERT_EQ(check_gemm(ref, o.c.data(), o.ldc), "");
  // A large slip in C(3, 4), a smaller one in C(1, 1): the message names C(3, 4).
  o.c[3 * o.ldc + 4] += 0.5f;
  o.c[1 * o.ldc + 1] += 1e-3f;
  const std::string why = check_gemm(ref, o.c.data(), o.ldc);
  EXPECT_NE(why.find("C(3, 4)"), std::string::npos) << why;
  EXPECT_NE(why.find("tolerance"), std::string::npos) << why;
  o.c[3 * o.ldc + 4] = kNaN;
  EXPECT_NE(check_gemm(ref, o.c.data(), o.ldc).find("C(3, 4) = nan"), std::string::npos);
}

TEST(GemmReference, ToleranceIsTheFloatErrorBound) {
  // 1 + k * 2^-24 rounds in float accumulation: within (k + 3) u * sum |a b| of the exact sum.
  const std::size_t k = 1000;
  std::vector<float> a(k, 1.0f), b(k, 1.0f);
  const GemmReference ref =
      reference_gemm(Trans::no, Trans::yes, 1, 1, k, 1, a.data(), k, b.data(), k, 0, nullptr, 1);
  EXPECT_EQ(ref.value[0], 1000.0);
  const double u = std::numeric_limits<float>::epsilon() / 2;
  EXPECT_NEAR(ref.tolerance[0], (k + 3) * u * 1000.0, 1e-3 * (k + 3) * u * 1000.0);
}

TEST(Gemm, NamesRoundTrip) {
  for (GemmVersion v : gemm_versions()) {
    GemmVersion back{};
    ASSERT_TRUE(parse_gemm_version(gemm_version_name(v), back));
    EXPECT_EQ(back, v);
  }
  GemmVersion ignored{};
  EXPECT_FALSE(parse_gemm_version("v9_magic", ignored));
  const Cost c = gemm_cost(2, 3, 4);
  EXPECT_EQ(c.flops, 48);
  EXPECT_EQ(c.bytes, 4 * (8 + 12 + 2 * 6));
}

}  // namespace
}  // namespace concurdl::kernels
