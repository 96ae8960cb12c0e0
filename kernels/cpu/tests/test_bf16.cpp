// bfloat16 (bf16.hpp): conversions round to nearest even and keep NaN, infinities and zeros; the
// BF16 GEMM equals a double-precision GEMM of the same bfloat16 inputs within float32 summation
// error, at shapes that cross its tile, k-block and n-block edges, odd k, strided rows, beta 0
// (C not read) and not; transposed operands give the plain call's bits; the same bits on 1 and 2
// threads; the peak is positive. Where the CPU has no AVX512_BF16 the GEMM tests skip with the
// reason, and the kernel throws it.
//   kernels_tests --gtest_filter='Bf16*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl::kernels;

TEST(Bf16Convert, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(1.00390625f), 0x3f80);  // 1 + 2^-8: a tie, to the even 1.0
  EXPECT_EQ(to_bf16(1.01171875f), 0x3f82);  // 1 + 3·2^-8: a tie, to the even 1 + 2^-6
  EXPECT_EQ(to_bf16(1.005f), 0x3f81);       // past the tie: up
  EXPECT_EQ(to_bf16(0.0f), 0x0000);
  EXPECT_EQ(to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // past bf16's largest
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload is only in the low bits must not round into infinity.
  std::uint32_t low_nan = 0x7f800001u;
  float f = 0;
  std::memcpy(&f, &low_nan, sizeof f);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(f))));
}

TEST(Bf16Convert, EveryBfloat16RoundTripsAndFloatsLoseAtMostHalfAnUlp) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = from_bf16(static_cast<bf16>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_bf16(f), b) << "bits " << b;
  }
  std::uint64_t state = 12345;
  for (int i = 0; i < 100000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto bits = static_cast<std::uint32_t>(state >> 33) & 0x7fffffffu;
    float f = 0;
    std::uint32_t u = (bits % 0x7e000000u) + 0x00800000u;  // normal, below bf16's largest
    std::memcpy(&f, &u, sizeof f);
    const float back = from_bf16(to_bf16(f));
    ASSERT_LE(std::fabs(back - f), std::ldexp(std::fabs(f), -8)) << f;
  }
  std::vector<float> in = {1.5f, -3.0f}, round(2);
  std::vector<bf16> mid(2);
  to_bf16(in, mid);
  from_bf16(mid, round);
  EXPECT_EQ(round, in);
  EXPECT_THROW(to_bf16(in, std::span<bf16>(mid).first(1)), std::invalid_argument);
}

TEST(Bf16Convert, TheBulkConversionGivesTheScalarBits) {
  std::vector<float> in;
  std::uint64_t state = 4242;
  for (int i = 0; i < 100003; ++i) {  // every bit pattern's kind: NaNs, infinities, subnormals
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto bits = static_cast<std::uint32_t>(state >> 32);
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    in.push_back(f);
  }
  std::vector<bf16> bulk(in.size());
  to_bf16(in, bulk);
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(bulk[i], to_bf16(in[i])) << i;
}

// A (m x k) and B (k x n) of bfloat16 values drawn in [-1, 1), rows strided by lda / ldb.
struct Operands {
  std::vector<bf16> a, b;
};
Operands operands(std::size_t m, std::size_t n, std::size_t k, std::size_t lda, std::size_t ldb) {
  Operands o{std::vector<bf16>(m * lda, 0x7fc0), std::vector<bf16>(k * ldb, 0x7fc0)};  // NaN pad
  std::uint64_t s = m * 131 + n * 7 + k;
  const auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24)) * 2 -
           1;
  };
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p) o.a[i * lda + p] = to_bf16(next());
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t j = 0; j < n; ++j) o.b[p * ldb + j] = to_bf16(next());
  return o;
}

class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_bf16()) GTEST_SKIP() << bf16_why_not();
  }
};

TEST_F(Bf16Gemm, EqualsADoubleGemmOfTheSameInputs) {
  struct Shape {
    std::size_t m, n, k;
  };
  for (const Shape sh : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{14, 32, 2}, Shape{15, 33, 3},
                         Shape{100, 300, 513}, Shape{50, 600, 1030}, Shape{29, 17, 1024}})
    for (const float beta : {0.0f, 0.5f}) {
      SCOPED_TRACE(std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                   ", beta " + std::to_string(beta));
      const std::size_t lda = sh.k + 3, ldb = sh.n + 5, ldc = sh.n + 2;
      const Operands o = operands(sh.m, sh.n, sh.k, lda, ldb);
      std::vector<float> c(sh.m * ldc), c0(sh.m * ldc);
      for (std::size_t i = 0; i < c.size(); ++i)
        c0[i] = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(i % 7);
      c = c0;
      gemm_bf16(sh.m, sh.n, sh.k, o.a.data(), lda, o.b.data(), ldb, beta, c.data(), ldc);
      double worst = 0;
      for (std::size_t i = 0; i < sh.m; ++i)
        for (std::size_t j = 0; j < sh.n; ++j) {
          double want = beta == 0.0f ? 0.0 : beta * static_cast<double>(c0[i * ldc + j]);
          double mag = std::fabs(want);
          for (std::size_t p = 0; p < sh.k; ++p) {
            const double x = static_cast<double>(from_bf16(o.a[i * lda + p])) *
                             static_cast<double>(from_bf16(o.b[p * ldb + j]));
            want += x;
            mag += std::fabs(x);
          }
          const double err = std::fabs(static_cast<double>(c[i * ldc + j]) - want);
          worst = std::max(worst, err / (mag + 1e-30));
        }
      // float32 sums of k exact products: k · 2^-24 relative to the sum of magnitudes.
      EXPECT_LE(worst, static_cast<double>(sh.k + 2) * std::ldexp(1.0, -24));
      for (std::size_t i = 0; i < sh.m; ++i)  // the padding between rows is untouched
        for (std::size_t j = sh.n; j < ldc; ++j)
          EXPECT_EQ(std::memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)), 0);
    }
}

// Transposed operands are packed into the same panels as their plain forms, so every (trans_a,
// trans_b) gives the plain call's bits, at shapes crossing the tile, k-block and n-block edges.
// (no, yes) with beta 0 takes the transposed route, B read in place, at 64 x 256 x 784 (two k
// blocks, a last block of B's rows short), 32 x 33 x 70 (short blocks, transposes' edges),
// 128 x 1030 x 1030 (three k blocks) and 29 x 300 x 1030 (a partial panel of A's rows); beta 0.5
// checks the direct route with a C to add. C has a padded row (ldc > n) that must stay as it was,
// on 1 and 2 threads.
TEST_F(Bf16Gemm, TransposedOperandsGiveThePlainCallsBits) {
  struct Shape {
    std::size_t m, n, k;
  };
  for (const int threads : {1, 2})
    for (const Shape sh : {Shape{1, 1, 1}, Shape{15, 33, 3}, Shape{64, 256, 784}, Shape{32, 33, 70},
                           Shape{128, 1030, 1030}, Shape{29, 300, 1030}})
      for (const Trans ta : {Trans::no, Trans::yes})
        for (const Trans tb : {Trans::no, Trans::yes})
          for (const float beta : {0.0f, 0.5f}) {
            SCOPED_TRACE(std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" +
                         std::to_string(sh.k) + (ta == Trans::yes ? " A^T" : "") +
                         (tb == Trans::yes ? " B^T" : "") + " beta " + std::to_string(beta) + ", " +
                         std::to_string(threads) + " threads");
            const ComputeThreadsScope scope(threads);
            const Operands o = operands(sh.m, sh.n, sh.k, sh.k, sh.n);
            // A^T stored k x m with lda m + 1, B^T stored n x k with ldb k + 1 (rows at odd
            // offsets: the pairs read as 32-bit words are unaligned).
            const std::size_t lda = ta == Trans::yes ? sh.m + 1 : sh.k;
            const std::size_t ldb = tb == Trans::yes ? sh.k + 1 : sh.n;
            std::vector<bf16> a = o.a, b = o.b;
            if (ta == Trans::yes) {
              a.assign(sh.k * lda, 0x7fc0);
              for (std::size_t i = 0; i < sh.m; ++i)
                for (std::size_t p = 0; p < sh.k; ++p) a[p * lda + i] = o.a[i * sh.k + p];
            }
            if (tb == Trans::yes) {
              b.assign(sh.n * ldb, 0x7fc0);
              for (std::size_t p = 0; p < sh.k; ++p)
                for (std::size_t j = 0; j < sh.n; ++j) b[j * ldb + p] = o.b[p * sh.n + j];
            }
            const std::size_t ldc = sh.n + 3;
            std::vector<float> plain(sh.m * ldc), got(sh.m * ldc);
            for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<float>(i % 7);
            got = plain;
            gemm_bf16(sh.m, sh.n, sh.k, o.a.data(), sh.k, o.b.data(), sh.n, beta, plain.data(),
                      ldc);
            gemm_bf16(ta, tb, sh.m, sh.n, sh.k, a.data(), lda, b.data(), ldb, beta, got.data(),
                      ldc);
            EXPECT_EQ(std::memcmp(plain.data(), got.data(), plain.size() * sizeof(float)), 0);
            for (std::size_t i = 0; i < sh.m; ++i)  // the padding of each row of C untouched
              for (std::size_t j = sh.n; j < ldc; ++j)
                ASSERT_EQ(got[i * ldc + j], static_cast<float>((i * ldc + j) % 7));
          }
  std::vector<bf16> a(8), b(8);
  std::vector<float> c(8);
  // A^T is k x m: lda must reach m, not k.
  EXPECT_THROW(
      gemm_bf16(Trans::yes, Trans::no, 4, 2, 2, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2),
      std::invalid_argument);
}

TEST_F(Bf16Gemm, SameBitsOnOneAndTwoThreads) {
  const std::size_t m = 61, n = 290, k = 700;
  const Operands o = operands(m, n, k, k, n);
  std::vector<float> one(m * n), two(m * n);
  {
    ComputeThreadsScope t(1);
    gemm_bf16(m, n, k, o.a.data(), k, o.b.data(), n, 0.0f, one.data(), n);
  }
  {
    ComputeThreadsScope t(2);
    gemm_bf16(m, n, k, o.a.data(), k, o.b.data(), n, 0.0f, two.data(), n);
  }
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// The fused update (GemmSgd): the bits of the product stored in C followed by sgd_update on
// C * grad_scale and the parameter rounded into params16, through whole tiles, edge tiles (61
// rows, 290 columns), a K over one block (700), and the weight gradient's transposes, at 1 and
// 2 threads, both 16-bit formats of params16. Refused with beta != 0.
TEST_F(Bf16Gemm, TheFusedUpdateGivesTheBitsOfTheProductThenTheUpdate) {
  struct Shape {
    std::size_t m, n, k;
    Trans ta;
  };
  const float lr = 0.05f, momentum = 0.9f, weight_decay = 5e-4f, scale = 0.25f;
  for (const Shape sh : {Shape{61, 290, 700, Trans::no}, Shape{256, 784, 64, Trans::yes}})
    for (const Half format : {Half::bf16, Half::fp16})
      for (int threads : {1, 2}) {
        ComputeThreadsScope scope(threads);
        const std::size_t m = sh.m, n = sh.n, k = sh.k;
        const Operands o = operands(m, n, k, k, n);  // B: k x n
        // A as the call reads it: m x k, or stored k x m when transposed (every value drawn).
        const std::vector<bf16> a = sh.ta == Trans::yes ? operands(k, 1, m, m, 1).a : o.a;
        const std::size_t lda = sh.ta == Trans::yes ? m : k;
        std::vector<float> grad(m * n), p0(m * n), v0(m * n);
        for (std::size_t i = 0; i < m * n; ++i) {
          p0[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
          v0[i] = static_cast<float>(i % 13) / 13.0f - 0.5f;
        }
        gemm_bf16(sh.ta, Trans::no, m, n, k, a.data(), lda, o.b.data(), n, 0.0f, grad.data(), n);
        std::vector<float> want_p = p0, want_v = v0;
        std::vector<std::uint16_t> want16(m * n);
        for (std::size_t i = 0; i < m * n; ++i) {
          sgd_update_scaled(want_p[i], want_v[i], grad[i], scale, lr, momentum, weight_decay);
          want16[i] = format == Half::bf16 ? to_bf16(want_p[i]) : to_fp16(want_p[i]);
        }
        std::vector<float> c(m * n), got_p = p0, got_v = v0;
        std::vector<std::uint16_t> got16(m * n);
        const GemmSgd u{.params = got_p.data(),
                        .velocity = got_v.data(),
                        .lr = lr,
                        .momentum = momentum,
                        .weight_decay = weight_decay,
                        .grad_scale = scale,
                        .params16 = got16.data(),
                        .params16_format = format};
        gemm_bf16(sh.ta, Trans::no, m, n, k, a.data(), lda, o.b.data(), n, 0.0f, c.data(), n, &u);
        const std::string what = "m=" + std::to_string(m) + " threads=" + std::to_string(threads);
#if defined(__FMA__)
        EXPECT_EQ(std::memcmp(got_p.data(), want_p.data(), m * n * sizeof(float)), 0) << what;
        EXPECT_EQ(std::memcmp(got_v.data(), want_v.data(), m * n * sizeof(float)), 0) << what;
        EXPECT_EQ(got16, want16) << what;
#else
        // A build for a CPU without FMA does not contract the reference's multiply-adds, while
        // the kernel (compiled for AVX512_BF16, which has FMA) does: within those roundings, and
        // the 16-bit copy the rounding of the parameter it holds.
        for (std::size_t i = 0; i < m * n; ++i) {
          ASSERT_NEAR(got_v[i], want_v[i], 1e-5f * (1.0f + std::fabs(want_v[i]))) << what;
          ASSERT_NEAR(got_p[i], want_p[i], 1e-5f * (1.0f + std::fabs(want_p[i]))) << what;
          ASSERT_EQ(got16[i], format == Half::bf16 ? to_bf16(got_p[i]) : to_fp16(got_p[i])) << what;
        }
        (void)want16;
#endif
      }
  std::vector<bf16> x(4, 0);
  std::vector<float> c(4), p(4), v(4);
  const GemmSgd u{.params = p.data(), .velocity = v.data()};
  EXPECT_THROW(
      gemm_bf16(Trans::no, Trans::no, 2, 2, 2, x.data(), 2, x.data(), 2, 1.0f, c.data(), 2, &u),
      std::invalid_argument);
}

TEST_F(Bf16Gemm, EmptyShapesAndKZero) {
  std::vector<float> c = {1, 2, 3, 4};
  gemm_bf16(0, 2, 3, nullptr, 3, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c[0], 1.0f);
  gemm_bf16(2, 2, 0, nullptr, 0, nullptr, 2, 0.5f, c.data(), 2);  // C = beta C
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2}));
}

TEST_F(Bf16Gemm, ThePeakIsMeasured) { EXPECT_GT(bf16_peak_flops(1, 0.02), 1e9); }

TEST(Bf16GemmArgs, ShortLeadingDimensionsAndAMissingIsaAreClearErrors) {
  std::vector<bf16> a(8), b(8);
  std::vector<float> c(8);
  EXPECT_THROW(gemm_bf16(2, 2, 4, a.data(), 3, b.data(), 2, 0.0f, c.data(), 2),
               std::invalid_argument);
  if (!have_bf16()) {
    try {
      gemm_bf16(2, 2, 2, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
      ADD_FAILURE() << "no error without AVX512_BF16";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("not "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
