// GEMM: every version against the double reference, over the shapes that break blocked code
// (empty, 1x1x1, odd, non-square, not multiples of the register tile, more than one cache
// block), all four transposes, alpha/beta variants and padded leading dimensions; v4 gives the
// same bits at 1, 2, 3, 4 and 8 threads and from concurrent callers.
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

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/reference.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 12345.0f;  // in C's padding: a kernel must never write there

// Restores the thread setting a test changes, so that other tests see the default.
struct ThreadsGuard {
  int saved = compute_threads();
  ~ThreadsGuard() { set_compute_threads(saved); }
};

struct Case {
  std::size_t m, n, k;
  Trans ta = Trans::no, tb = Trans::no;
  float alpha = 1.0f, beta = 0.0f;
  std::size_t pad = 0;  // leading dimension = row length + pad

  std::string describe() const {
    char s[160];
    std::snprintf(s, sizeof s, "m=%zu n=%zu k=%zu ta=%d tb=%d alpha=%g beta=%g pad=%zu", m, n, k,
                  ta == Trans::yes, tb == Trans::yes, alpha, beta, pad);
    return s;
  }
};

// Operands of a case: A, B with NaN in their padding (a kernel reading it poisons C), C with
// NaN everywhere when beta == 0 (it must not be read) and the sentinel in its padding.
struct Operands {
  std::size_t lda, ldb, ldc;
  std::vector<float> a, b, c, c0;
};

Operands make_operands(const Case& t, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t a_rows = t.ta == Trans::no ? t.m : t.k, a_cols = t.ta == Trans::no ? t.k : t.m;
  const std::size_t b_rows = t.tb == Trans::no ? t.k : t.n, b_cols = t.tb == Trans::no ? t.n : t.k;
  Operands o;
  o.lda = a_cols + t.pad;
  o.ldb = b_cols + t.pad;
  o.ldc = t.n + t.pad;
  auto fill = [&](std::vector<float>& x, std::size_t rows, std::size_t cols, std::size_t ld,
                  float pad_value, bool values) {
    x.assign(rows * ld, pad_value);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) x[i * ld + j] = values ? dist(rng) : kNaN;
  };
  fill(o.a, a_rows, a_cols, o.lda, kNaN, true);
  fill(o.b, b_rows, b_cols, o.ldb, kNaN, true);
  fill(o.c, t.m, t.n, o.ldc, kSentinel, t.beta != 0.0f);
  o.c0 = o.c;
  return o;
}

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

// The fused epilogue (bias, ReLU, a ReLU's gradient) gives the bits of the product followed by
// ops.hpp's passes, for every version, through v4's transposed and direct shortcuts and its
// packed path, at 1-3 threads; only C's own columns are touched (the padding keeps its
// sentinel).
TEST_P(GemmVersions, TheEpilogueGivesTheBitsOfTheSeparatePasses) {
  ThreadsGuard guard;
  const Case cases[] = {{64, 256, 784, Trans::no, Trans::yes},   // a layer's forward, transposed
                        {64, 10, 128, Trans::no, Trans::yes},    // the last layer's
                        {128, 10, 2048, Trans::no, Trans::yes},  // narrow, with a team
                        {64, 256, 128, Trans::no, Trans::no, 1.0f, 0.0f, 3},  // a dA, padded
                        {37, 45, 19, Trans::yes, Trans::no, 1.0f, 0.5f}};     // beta reads C
  for (const Case& t : cases) {
    Operands o = make_operands(t, 3);
    if (t.beta == 0.0f)  // C is written, never read: NaN there would only hide a bad read
      for (std::size_t i = 0; i < t.m; ++i) std::fill_n(o.c0.data() + i * o.ldc, t.n, 0.0f);
    std::vector<float> bias(t.n), act(t.m * o.ldc, kNaN);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : bias) x = dist(rng);
    for (std::size_t i = 0; i < t.m; ++i)
      for (std::size_t j = 0; j < t.n; ++j) act[i * o.ldc + j] = dist(rng);
    for (int threads : {1, 2, 3}) {
      set_compute_threads(threads);
      for (int kind = 0; kind < 3; ++kind) {  // bias + ReLU, ReLU', bias alone (the last layer)
        std::vector<float> want = o.c0, got = o.c0;
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
             t.beta, want.data(), o.ldc);
        for (std::size_t i = 0; i < t.m; ++i) {
          float* row = want.data() + i * o.ldc;
          if (kind != 1) {
            add_bias_rows(row, 1, t.n, o.ldc, bias.data());
            if (kind == 0) relu_forward(row, row, t.n);
          } else {
            relu_backward(act.data() + i * o.ldc, row, t.n);
          }
        }
        const GemmEpilogue e = kind == 1 ? GemmEpilogue{.relu_of = act.data(), .ld_relu_of = o.ldc}
                                         : GemmEpilogue{.bias = bias.data(), .relu = kind == 0};
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
             t.beta, got.data(), o.ldc, e);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << t.describe() << ": threads=" << threads << " epilogue " << kind;
      }
    }
  }
  std::vector<float> c(4);
  const std::vector<float> a(4, 1.0f), act(4, 1.0f);
  EXPECT_THROW(gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f,
                    c.data(), 2, {.relu_of = act.data(), .ld_relu_of = 1}),
               std::invalid_argument);
}

// The fused optimiser step (GemmSgd) gives the parameters and velocities of the product stored
// in C followed by sgd_update over it, bit for bit, for every version: through v4's whole tiles,
// its half-width and scratch edge tiles and short last row panels, a K longer than one cache
// block (the last block applies the step, the earlier ones leave partial sums in C), a last
// panel of one row (R = 1 with AVX-512 and AVX2 alike), and the transposed shortcut (the update
// then follows the copy back), at 1-3 threads (the team from 2M multiply-adds: the first, the
// 43 x 784 and the transposed case). C's padding is never written; the parameters' padding is
// never touched. Bad uses are refused.
TEST_P(GemmVersions, TheFusedSgdStepGivesTheBitsOfTheProductThenTheUpdate) {
  ThreadsGuard guard;
  const Case cases[] = {{256, 784, 64, Trans::yes, Trans::no},  // layer 0's dW (half tile)
                        {300, 40, 64, Trans::yes, Trans::no, 1.0f, 0.0f, 5},  // a scratch edge
                        {45, 100, 700, Trans::yes, Trans::no},                // K over one block
                        {10, 48, 64, Trans::yes, Trans::no},     // 10 rows, a half panel
                        {43, 784, 64, Trans::yes, Trans::no},    // one row left, a team
                        {43, 40, 64, Trans::yes, Trans::no},     // and an edge
                        {64, 256, 784, Trans::no, Trans::yes}};  // the transposed path
  const float lr = 0.05f, momentum = 0.9f, weight_decay = 5e-4f;
  for (const Case& t : cases) {
    Operands o = make_operands(t, 7);
    std::vector<float> p0(t.m * o.ldc, kSentinel), v0(t.m * o.ldc, kSentinel);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::size_t i = 0; i < t.m; ++i)
      for (std::size_t j = 0; j < t.n; ++j) {
        p0[i * o.ldc + j] = dist(rng);
        v0[i * o.ldc + j] = dist(rng);
      }
    for (int threads : {1, 2, 3}) {
      set_compute_threads(threads);
      std::vector<float> grad = o.c0, want_p = p0, want_v = v0;
      gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f,
           grad.data(), o.ldc);
      for (std::size_t i = 0; i < t.m; ++i)
        for (std::size_t j = 0; j < t.n; ++j) {
          const std::size_t at = i * o.ldc + j;
          sgd_update(want_p[at], want_v[at], grad[at], lr, momentum, weight_decay);
        }
      std::vector<float> c = o.c0, got_p = p0, got_v = v0;
      const GemmSgd u{.params = got_p.data(),
                      .velocity = got_v.data(),
                      .lr = lr,
                      .momentum = momentum,
                      .weight_decay = weight_decay};
      gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f,
           c.data(), o.ldc, {.sgd = &u});
      EXPECT_EQ(std::memcmp(got_p.data(), want_p.data(), want_p.size() * sizeof(float)), 0)
          << t.describe() << ": threads=" << threads << ": parameters";
      EXPECT_EQ(std::memcmp(got_v.data(), want_v.data(), want_v.size() * sizeof(float)), 0)
          << t.describe() << ": threads=" << threads << ": velocities";
      for (std::size_t i = 0; i < t.m; ++i)
        for (std::size_t j = t.n; j < o.ldc; ++j)
          if (c[i * o.ldc + j] != kSentinel) {
            ADD_FAILURE() << t.describe() << ": wrote C's padding at (" << i << ", " << j << ")";
            i = t.m;
            break;
          }
    }
  }
  std::vector<float> c(4), p(4), v(4);
  const std::vector<float> a(4, 1.0f);
  const GemmSgd u{.params = p.data(), .velocity = v.data(), .lr = lr};
  const auto call = [&](float alpha, float beta, const GemmEpilogue& e) {
    gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, alpha, a.data(), 2, a.data(), 2, beta, c.data(),
         2, e);
  };
  EXPECT_NO_THROW(call(1.0f, 0.0f, {.sgd = &u}));
  EXPECT_THROW(call(0.5f, 0.0f, {.sgd = &u}), std::invalid_argument);
  EXPECT_THROW(call(1.0f, 1.0f, {.sgd = &u}), std::invalid_argument);
  EXPECT_THROW(call(1.0f, 0.0f, {.bias = a.data(), .sgd = &u}), std::invalid_argument);
  const GemmSgd no_velocity{.params = p.data()};
  EXPECT_THROW(call(1.0f, 0.0f, {.sgd = &no_velocity}), std::invalid_argument);
  const GemmSgd params_in_c{.params = c.data(), .velocity = v.data()};
  EXPECT_THROW(call(1.0f, 0.0f, {.sgd = &params_in_c}), std::invalid_argument);
  const GemmSgd one_buffer{.params = p.data(), .velocity = p.data()};
  EXPECT_THROW(call(1.0f, 0.0f, {.sgd = &one_buffer}), std::invalid_argument);
}

// A mixed-precision step's fused update: the gradient times grad_scale (a power of two), and
// the updated parameter rounded into params16, for every version: the bits of the product
// stored in C, then sgd_update on C * grad_scale and the rounding, element by element. The
// edges as above; params16's padding is never written.
TEST_P(GemmVersions, TheFusedSgdStepScalesTheGradientAndRoundsTheParameters) {
  ThreadsGuard guard;
  const Case cases[] = {{256, 784, 64, Trans::yes, Trans::no},
                        {300, 40, 64, Trans::yes, Trans::no, 1.0f, 0.0f, 5},
                        {45, 100, 700, Trans::yes, Trans::no},
                        {43, 784, 64, Trans::yes, Trans::no}};
  const float lr = 0.05f, momentum = 0.9f, weight_decay = 5e-4f, scale = 1.0f / 1024;
  for (const Half format : {Half::fp16, Half::bf16})
    for (const Case& t : cases) {
      Operands o = make_operands(t, 3);
      std::vector<float> p0(t.m * o.ldc, kSentinel), v0(t.m * o.ldc, kSentinel);
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (std::size_t i = 0; i < t.m; ++i)
        for (std::size_t j = 0; j < t.n; ++j) {
          p0[i * o.ldc + j] = dist(rng);
          v0[i * o.ldc + j] = dist(rng);
        }
      const std::uint16_t kUntouched = 0x5a5a;
      for (int threads : {1, 2}) {
        set_compute_threads(threads);
        std::vector<float> grad = o.c0, want_p = p0, want_v = v0;
        std::vector<std::uint16_t> want16(p0.size(), kUntouched);
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb,
             0.0f, grad.data(), o.ldc);
        for (std::size_t i = 0; i < t.m; ++i)
          for (std::size_t j = 0; j < t.n; ++j) {
            const std::size_t at = i * o.ldc + j;
            sgd_update_scaled(want_p[at], want_v[at], grad[at], scale, lr, momentum, weight_decay);
            want16[at] = format == Half::fp16 ? to_fp16(want_p[at]) : to_bf16(want_p[at]);
          }
        std::vector<float> c = o.c0, got_p = p0, got_v = v0;
        std::vector<std::uint16_t> got16(p0.size(), kUntouched);
        const GemmSgd u{.params = got_p.data(),
                        .velocity = got_v.data(),
                        .lr = lr,
                        .momentum = momentum,
                        .weight_decay = weight_decay,
                        .grad_scale = scale,
                        .params16 = got16.data(),
                        .params16_format = format};
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb,
             0.0f, c.data(), o.ldc, {.sgd = &u});
        const std::string what = t.describe() + ": threads=" + std::to_string(threads) +
                                 (format == Half::fp16 ? " fp16" : " bf16");
        EXPECT_EQ(std::memcmp(got_p.data(), want_p.data(), want_p.size() * sizeof(float)), 0)
            << what << ": parameters";
        EXPECT_EQ(std::memcmp(got_v.data(), want_v.data(), want_v.size() * sizeof(float)), 0)
            << what << ": velocities";
        EXPECT_EQ(got16, want16) << what << ": the 16-bit parameters";
      }
    }
  std::vector<float> c(4), p(4), v(4);
  std::vector<std::uint16_t> p16(4);
  const std::vector<float> a(4, 1.0f);
  const auto call = [&](const GemmSgd& u) {
    gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f, c.data(),
         2, {.sgd = &u});
  };
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .grad_scale = 0.0f}),
               std::invalid_argument);
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .grad_scale = kNaN}),
               std::invalid_argument);
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .params16 = p16.data()}),
               std::invalid_argument);
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .params16_format = Half::bf16}),
               std::invalid_argument);
}

// GEMM v4 on 16-bit operands widened while they are packed gives the bits of widening both into
// float32 buffers and calling v4: every transpose, the training step's shapes (the transposed
// shortcut's 64 x 1024 x 784, W read in place for float32 and packed here; the 1024-float rows
// that alias in L1), edges, a K over one block, a leading dimension with padding, a fused
// update, at 1 and 2 threads; Half::none and another version are refused.
TEST(GemmV4, SixteenBitOperandsGiveTheBitsOfTheirWidenedCopies) {
  ThreadsGuard guard;
  const Case cases[] = {{64, 1024, 784, Trans::no, Trans::yes},   // forward, transposed shortcut
                        {64, 1024, 1024, Trans::no, Trans::yes},  // forward, aliasing rows
                        {1024, 784, 64, Trans::yes, Trans::no},   // weight gradient
                        {64, 784, 1024, Trans::no, Trans::no},    // input gradient
                        {64, 10, 1024, Trans::no, Trans::yes},    // the 10 classes
                        {37, 45, 600, Trans::yes, Trans::yes, 1.0f, 0.0f, 3},
                        {13, 7, 5, Trans::no, Trans::no, 1.0f, 0.5f, 1}};
  for (const Half format : {Half::fp16, Half::bf16})
    for (const Case& t : cases) {
      Operands o = make_operands(t, 11);
      // The operands rounded to 16 bits (padding included: NaN stays NaN), and widened back.
      const auto narrow = [&](const std::vector<float>& x) {
        std::vector<std::uint16_t> h(x.size());
        for (std::size_t i = 0; i < x.size(); ++i)
          h[i] = format == Half::fp16 ? to_fp16(x[i]) : to_bf16(x[i]);
        return h;
      };
      const auto widen = [&](const std::vector<std::uint16_t>& h) {
        std::vector<float> x(h.size());
        for (std::size_t i = 0; i < h.size(); ++i)
          x[i] = format == Half::fp16 ? from_fp16(h[i]) : from_bf16(h[i]);
        return x;
      };
      const std::vector<std::uint16_t> a16 = narrow(o.a), b16 = narrow(o.b);
      const std::vector<float> a32 = widen(a16), b32 = widen(b16);
      for (int threads : {1, 2}) {
        set_compute_threads(threads);
        std::vector<float> want = o.c0, got = o.c0;
        gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1.0f, a32.data(), o.lda,
             b32.data(), o.ldb, t.beta, want.data(), o.ldc);
        gemm_16bit(format, t.ta, t.tb, t.m, t.n, t.k, a16.data(), o.lda, b16.data(), o.ldb, t.beta,
                   got.data(), o.ldc);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << t.describe() << ": threads=" << threads
            << (format == Half::fp16 ? " fp16" : " bf16");
      }
    }
  // A fused update through the 16-bit operands: the float32 call's bits.
  const Case t{256, 784, 64, Trans::yes, Trans::no};
  Operands o = make_operands(t, 2);
  std::vector<std::uint16_t> a16(o.a.size()), b16(o.b.size());
  std::vector<float> a32(o.a.size()), b32(o.b.size());
  for (std::size_t i = 0; i < a16.size(); ++i) a32[i] = from_fp16(a16[i] = to_fp16(o.a[i]));
  for (std::size_t i = 0; i < b16.size(); ++i) b32[i] = from_fp16(b16[i] = to_fp16(o.b[i]));
  std::vector<float> p1(t.m * o.ldc, 0.5f), v1(p1.size(), 0.25f), p2 = p1, v2 = v1, c(p1.size());
  std::vector<std::uint16_t> h1(p1.size()), h2(p1.size());
  const GemmSgd u1{.params = p1.data(),
                   .velocity = v1.data(),
                   .lr = 0.1f,
                   .momentum = 0.9f,
                   .grad_scale = 0.5f,
                   .params16 = h1.data(),
                   .params16_format = Half::fp16};
  GemmSgd u2 = u1;
  u2.params = p2.data();
  u2.velocity = v2.data();
  u2.params16 = h2.data();
  gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1.0f, a32.data(), o.lda, b32.data(),
       o.ldb, 0.0f, c.data(), o.ldc, {.sgd = &u1});
  gemm_16bit(Half::fp16, t.ta, t.tb, t.m, t.n, t.k, a16.data(), o.lda, b16.data(), o.ldb, 0.0f,
             c.data(), o.ldc, {.sgd = &u2});
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(v1, v2);
  EXPECT_EQ(h1, h2);
  std::vector<std::uint16_t> x(4, 0);
  std::vector<float> y(4);
  EXPECT_THROW(gemm_16bit(Half::none, Trans::no, Trans::no, 2, 2, 2, x.data(), 2, x.data(), 2, 0.0f,
                          y.data(), 2),
               std::invalid_argument);
  EXPECT_THROW(gemm_16bit(Half::fp16, Trans::no, Trans::no, 2, 2, 2, x.data(), 1, x.data(), 2, 0.0f,
                          y.data(), 2),
               std::invalid_argument);
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
