// The element-wise, reduction and softmax cross-entropy kernels (ops.hpp) against plain
// double-precision loops, on odd sizes (tails of the 8-lane loops, partial chunks), and the
// determinism the trainer relies on: the same bits on every call and at every thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::kernels {
namespace {

// Sizes: empty, tiny, odd, one past a chunk, and large enough to run in parallel (also under
// the sanitizers: the parallel paths are what TSan is for).
const std::vector<std::size_t> kSizes = {0, 1, 7, 9, 4095, 4097, kParallelMin + 5};
const std::vector<int> kThreads = {1, 2, 3, 8};

// Deterministic values in [-1, 1) (an LCG: no <random> needed for test data).
std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

std::vector<std::uint8_t> labels(std::size_t rows, std::size_t classes) {
  std::vector<std::uint8_t> y(rows);
  for (std::size_t r = 0; r < rows; ++r) y[r] = static_cast<std::uint8_t>((r * 7 + 3) % classes);
  return y;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp must not see the null data() of an empty vector, even for 0 bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Restores the compute thread count a test changed.
class ThreadsGuard {
 public:
  ThreadsGuard() : saved_(compute_threads()) {}
  ~ThreadsGuard() { set_compute_threads(saved_); }

 private:
  int saved_;
};

TEST(Ops, SumAndDotMatchDoubleReference) {
  for (const std::size_t n : kSizes) {
    const auto x = values(n, 1), y = values(n, 2);
    double s = 0, sa = 0, d = 0, da = 0;
    for (std::size_t i = 0; i < n; ++i) {
      s += x[i];
      sa += std::fabs(x[i]);
      d += double{x[i]} * y[i];
      da += std::fabs(double{x[i]} * y[i]);
    }
    // Float partials: the error bound grows with the sum of magnitudes, not the sum.
    EXPECT_NEAR(sum(x.data(), n), s, 1e-6 * sa + 1e-6) << "n=" << n;
    EXPECT_NEAR(dot(x.data(), y.data(), n), d, 1e-6 * da + 1e-6) << "n=" << n;
  }
}

TEST(Ops, MaxValue) {
  EXPECT_EQ(max_value(nullptr, 0), -std::numeric_limits<float>::infinity());
  for (const std::size_t n : kSizes) {
    if (n == 0) continue;
    auto x = values(n, 3);
    x[n / 2] = 5.0f;  // somewhere in the middle chunk, maybe in a tail
    EXPECT_EQ(max_value(x.data(), n), 5.0f) << "n=" << n;
    x[n - 1] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(max_value(x.data(), n))) << "n=" << n;
  }
}

TEST(Ops, ColumnSumsMatchReference) {
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1},
                                   {3, 7},
                                   {64, 10},
                                   {257, 129},
                                   {1000, 67},
                                   {kParallelMin / 130 + 3, 130}}) {
    const std::size_t ld = cols + 3;  // a leading dimension wider than the row
    const auto x = values(rows * ld, 4);
    std::vector<float> out(cols, 0.5f), out_beta(cols, 0.5f);
    column_sums(x.data(), rows, cols, ld, out.data());
    column_sums(x.data(), rows, cols, ld, out_beta.data(), 2.0f);
    for (std::size_t c = 0; c < cols; ++c) {
      double s = 0;
      for (std::size_t r = 0; r < rows; ++r) s += x[r * ld + c];
      const double tol = 1e-6 * static_cast<double>(rows) + 1e-6;
      EXPECT_NEAR(out[c], s, tol) << rows << "x" << cols << " column " << c;
      EXPECT_NEAR(out_beta[c], 1.0 + s, tol) << rows << "x" << cols << " column " << c;
    }
  }
}

TEST(Ops, ElementWiseMatchReference) {
  for (const std::size_t n : kSizes) {
    const auto x = values(n, 5), y0 = values(n, 6);
    std::vector<float> relu(n), grad = y0, ax = y0, sc = x;
    relu_forward(x.data(), relu.data(), n);
    relu_backward(relu.data(), grad.data(), n);
    axpy(n, 0.25f, x.data(), ax.data());
    scale(n, -3.0f, sc.data());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(relu[i], x[i] > 0 ? x[i] : 0.0f) << i;
      ASSERT_EQ(grad[i], x[i] > 0 ? y0[i] : 0.0f) << i;
      ASSERT_NEAR(ax[i], y0[i] + 0.25 * x[i], 1e-6) << i;
      ASSERT_EQ(sc[i], -3.0f * x[i]) << i;
    }
    std::vector<float> in_place = x;
    relu_forward(in_place.data(), in_place.data(), n);
    EXPECT_TRUE(same_bits(in_place, relu));
  }
}

TEST(Ops, AddBiasRows) {
  const std::size_t rows = 37, cols = 13, ld = 16;
  const auto y0 = values(rows * ld, 7), b = values(cols, 8);
  auto y = y0;
  add_bias_rows(y.data(), rows, cols, ld, b.data());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < ld; ++c)
      ASSERT_EQ(y[r * ld + c], c < cols ? y0[r * ld + c] + b[c] : y0[r * ld + c]) << r << "," << c;
}

// Softmax cross-entropy in double: the reference the float kernel is held to.
double reference_xent(const std::vector<float>& z, const std::vector<std::uint8_t>& y,
                      std::size_t rows, std::size_t classes, std::vector<double>& p) {
  p.assign(rows * classes, 0);
  double loss = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    double m = z[r * classes];
    for (std::size_t k = 1; k < classes; ++k) m = std::max(m, double{z[r * classes + k]});
    double s = 0;
    for (std::size_t k = 0; k < classes; ++k) s += std::exp(z[r * classes + k] - m);
    for (std::size_t k = 0; k < classes; ++k)
      p[r * classes + k] = std::exp(z[r * classes + k] - m) / s;
    loss += std::log(s) - (z[r * classes + y[r]] - m);
  }
  return loss / static_cast<double>(rows);
}

TEST(Ops, SoftmaxXentMatchesReference) {
  for (const auto& [rows, classes] : {std::pair<std::size_t, std::size_t>{1, 2},
                                      {3, 10},
                                      {65, 7},
                                      {5000, 10},
                                      {kParallelMin / 10 + 3, 10}}) {
    auto z = values(rows * classes, 9);
    for (auto& v : z) v *= 8.0f;
    const auto y = labels(rows, classes);
    std::vector<double> p_ref;
    const double loss_ref = reference_xent(z, y, rows, classes, p_ref);
    std::vector<float> p(rows * classes), d(rows * classes);
    const double loss = softmax_xent_forward(z.data(), y.data(), rows, classes, p.data());
    EXPECT_NEAR(loss, loss_ref, 1e-5 * std::max(1.0, loss_ref)) << rows << "x" << classes;
    softmax_xent_backward(p.data(), y.data(), rows, classes, d.data());
    for (std::size_t i = 0; i < rows * classes; ++i) {
      ASSERT_NEAR(p[i], p_ref[i], 1e-6) << i;
      const double onehot = (i % classes) == y[i / classes] ? 1.0 : 0.0;
      ASSERT_NEAR(d[i], (p_ref[i] - onehot) / static_cast<double>(rows), 1e-6) << i;
    }
    // In place (probs over the logits, gradient over the probs) gives the same bits.
    auto zz = z;
    EXPECT_EQ(softmax_xent_forward(zz.data(), y.data(), rows, classes, zz.data()), loss);
    EXPECT_TRUE(same_bits(zz, p));
    softmax_xent_backward(zz.data(), y.data(), rows, classes, zz.data());
    EXPECT_TRUE(same_bits(zz, d));
  }
}

TEST(Ops, SoftmaxXentIsStableForHugeLogits) {
  // exp(1000) overflows a float; a naive softmax gives inf/inf = NaN and log(0) = -inf.
  const std::vector<float> z = {1000.0f, 0.0f, -1000.0f, -1000.0f, 0.0f, 1000.0f};
  const std::vector<std::uint8_t> y = {0, 0};
  std::vector<float> p(6);
  const double loss = softmax_xent_forward(z.data(), y.data(), 2, 3, p.data());
  EXPECT_NEAR(loss, (0.0 + 2000.0) / 2, 1e-3);  // row 0 certain and right; row 1 off by 2000
  EXPECT_FLOAT_EQ(p[0], 1.0f);
  EXPECT_FLOAT_EQ(p[5], 1.0f);
  for (const float v : p) EXPECT_TRUE(std::isfinite(v));
}

// The exponentials are computed in float operations that vectorise, not by std::exp: each
// probability must still be within a few ulp of the double-precision value, from e^0 down to
// e^-87 (the floor below which it is e^-87 rather than 0), and a NaN logit must make the loss
// NaN, not a number.
TEST(Ops, SoftmaxProbabilitiesAreWithinAFewUlpAndKeepNaN) {
  const std::size_t rows = 8650;  // logits 0 .. -86.5 below the max
  std::vector<float> z(rows * 2), p(rows * 2);
  const std::vector<std::uint8_t> y(rows, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    z[2 * r] = 0.5f;
    z[2 * r + 1] = 0.5f - 0.01f * static_cast<float>(r) - 0.003f;
  }
  softmax_xent_forward(z.data(), y.data(), rows, 2, p.data());
  double worst = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const float shifted = z[2 * r + 1] - z[2 * r];  // the logit less its row's max, in float
    const double e = std::exp(static_cast<double>(shifted));
    const double want = e / (1.0 + e);
    worst = std::max(worst, std::abs(p[2 * r + 1] - want) / want);
  }
  EXPECT_LT(worst, 4 * std::numeric_limits<float>::epsilon()) << "largest relative error";
  std::vector<float> bad = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 2.0f};
  const std::vector<std::uint8_t> y2 = {0, 1};
  EXPECT_TRUE(std::isnan(softmax_xent_forward(bad.data(), y2.data(), 2, 2, bad.data())));
  EXPECT_TRUE(std::isnan(bad[1]));
}

TEST(Ops, SoftmaxXentRejectsABadLabel) {
  const std::vector<float> z(6, 0.0f);
  const std::vector<std::uint8_t> y = {0, 3};
  std::vector<float> p(6);
  EXPECT_THROW(softmax_xent_forward(z.data(), y.data(), 2, 3, p.data()), std::invalid_argument);
}

TEST(Ops, ArgmaxCorrect) {
  const std::size_t rows = kParallelMin / 10 + 9, classes = 10;  // in parallel
  const auto s = values(rows * classes, 10);
  auto y = labels(rows, classes);
  std::size_t expect = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < classes; ++k)
      if (s[r * classes + k] > s[r * classes + best]) best = k;
    if (r % 3 == 0) y[r] = static_cast<std::uint8_t>(best);
    expect += best == y[r];
  }
  EXPECT_EQ(argmax_correct(s.data(), y.data(), rows, classes), expect);
  const std::vector<float> tie = {1.0f, 2.0f, 2.0f};  // ties: the first maximum
  const std::vector<std::uint8_t> one = {1};
  EXPECT_EQ(argmax_correct(tie.data(), one.data(), 1, 3), 1u);
}

// Every kernel, at 1, 2, 3 and 8 threads and twice each: the same bits as the first call at
// one thread (fixed chunking; partials combined in chunk order).
TEST(Ops, DeterministicAcrossCallsAndThreadCounts) {
  ThreadsGuard guard;
  // Every size above kParallelMin, so each kernel runs in a team.
  const std::size_t n = kParallelMin + 4099, classes = 10, rows = n / classes, cols = 129;
  const auto x = values(n, 11), y = values(n, 12);
  const auto lab = labels(rows, classes);
  struct Outputs {
    float s, d, m;
    double loss;
    std::size_t hits;
    std::vector<float> colsum, probs, ax;
  };
  auto run = [&] {
    Outputs o;
    o.s = sum(x.data(), n);
    o.d = dot(x.data(), y.data(), n);
    o.m = max_value(x.data(), n);
    o.colsum.resize(cols);
    column_sums(x.data(), n / cols, cols, cols, o.colsum.data());
    o.probs.resize(rows * classes);
    o.loss = softmax_xent_forward(x.data(), lab.data(), rows, classes, o.probs.data());
    o.hits = argmax_correct(x.data(), lab.data(), rows, classes);
    o.ax = y;
    axpy(n, 0.5f, x.data(), o.ax.data());
    return o;
  };
  set_compute_threads(1);
  const Outputs ref = run();
  for (const int t : kThreads) {
    set_compute_threads(t);
    for (int rep = 0; rep < 2; ++rep) {
      const Outputs o = run();
      EXPECT_TRUE(same_bits(o.s, ref.s)) << t << " threads";
      EXPECT_TRUE(same_bits(o.d, ref.d)) << t << " threads";
      EXPECT_TRUE(same_bits(o.m, ref.m)) << t << " threads";
      EXPECT_EQ(o.loss, ref.loss) << t << " threads";
      EXPECT_EQ(o.hits, ref.hits) << t << " threads";
      EXPECT_TRUE(same_bits(o.colsum, ref.colsum)) << t << " threads";
      EXPECT_TRUE(same_bits(o.probs, ref.probs)) << t << " threads";
      EXPECT_TRUE(same_bits(o.ax, ref.ax)) << t << " threads";
    }
  }
}

TEST(Ops, CostsAreDeclared) {
  EXPECT_EQ(sum_cost(100).flops, 100);
  EXPECT_EQ(sum_cost(100).bytes, 400);
  EXPECT_EQ(dot_cost(100).flops, 200);
  EXPECT_EQ(dot_cost(100).bytes, 800);
  EXPECT_EQ(axpy_cost(10).bytes, 120);
  EXPECT_EQ(column_sums_cost(4, 3).flops, 12);
  EXPECT_GT(softmax_xent_forward_cost(64, 10).flops, 0);
  EXPECT_GT(softmax_xent_backward_cost(64, 10).bytes, 0);
  EXPECT_GT(relu_backward_cost(10).intensity(), 0);
}

}  // namespace
}  // namespace concurdl::kernels
