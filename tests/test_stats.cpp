// Tests of the statistics and scaling models against values computed independently: by hand
// (shown in the comments), with exact binomial sums, or from published examples.
// Run: build/bin/harness_tests --gtest_filter='Stats*'
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "concurdl/harness/stats.hpp"

namespace concurdl {
namespace {

std::vector<double> one_to(int n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 1.0);
  return v;
}

TEST(StatsSummary, KnownValuesOneToTen) {
  // Shuffled on purpose: summarize must not rely on the input order.
  const std::vector<double> v = {7, 3, 10, 1, 5, 9, 2, 8, 4, 6};
  const Summary s = summarize(v);
  EXPECT_EQ(s.n, 10u);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  // Sample stdev: sum of squared deviations 82.5, / 9, sqrt -> 3.0276503540974917.
  EXPECT_NEAR(s.stdev, 3.0276503540974917, 1e-12);
  // n = 10: P(K <= 1) = 11/1024 = 1.07% <= 2.5%, P(K <= 2) = 56/1024 = 5.47% > 2.5%, so
  // j = 2 and the CI is [X(2), X(9)] with coverage 1 - 22/1024 = 97.85%.
  EXPECT_DOUBLE_EQ(s.ci95_lo, 2);
  EXPECT_DOUBLE_EQ(s.ci95_hi, 9);
}

TEST(StatsSummary, OddCountAndSingleValue) {
  const std::vector<double> odd = {3, 1, 2};
  EXPECT_DOUBLE_EQ(summarize(odd).median, 2);
  const std::vector<double> one = {4.25};
  const Summary s = summarize(one);
  EXPECT_DOUBLE_EQ(s.median, 4.25);
  EXPECT_DOUBLE_EQ(s.stdev, 0);
  EXPECT_DOUBLE_EQ(s.ci95_lo, 4.25);
  EXPECT_DOUBLE_EQ(s.ci95_hi, 4.25);
}

TEST(StatsSummary, EmptyThrows) {
  const std::vector<double> empty;
  EXPECT_THROW(summarize(empty), std::invalid_argument);
  EXPECT_THROW(median(empty), std::invalid_argument);
}

TEST(StatsSummary, MedianCiRanksFollowBinomialRule) {
  // Expected ranks (j, n+1-j) from exact binomial sums (Python fractions): the largest j with
  // P(K <= j-1) <= 1/40, K ~ Binomial(n, 1/2). Samples 1..n make each value its own rank.
  // n <= 5 has no such j: [min, max] covers only 1 - 2 * 0.5^n (93.75% at n = 5).
  struct Case {
    int n, lo, hi;
  };
  // 1500 is past the point where 0.5^n underflows a double.
  const Case cases[] = {{2, 1, 2},     {5, 1, 5},        {6, 1, 6},       {9, 2, 8},
                        {11, 2, 10},   {15, 4, 12},      {20, 6, 15},     {30, 10, 21},
                        {100, 40, 61}, {1000, 469, 532}, {1500, 712, 789}};
  for (const Case& c : cases) {
    const Summary s = summarize(one_to(c.n));
    EXPECT_DOUBLE_EQ(s.ci95_lo, c.lo) << "n=" << c.n;
    EXPECT_DOUBLE_EQ(s.ci95_hi, c.hi) << "n=" << c.n;
  }
}

TEST(StatsT95, TableAndLimit) {
  EXPECT_NEAR(t95(1), 12.706204736, 1e-8);
  EXPECT_NEAR(t95(5), 2.570581836, 1e-8);
  EXPECT_NEAR(t95(30), 2.042272456, 1e-8);
  // Beyond the table: quantiles from the regularized incomplete beta, by bisection.
  EXPECT_NEAR(t95(31), 2.039513446, 1e-6);
  EXPECT_NEAR(t95(40), 2.021075390, 1e-6);
  EXPECT_NEAR(t95(120), 1.979930405, 1e-6);
  EXPECT_NEAR(t95(1000000), 1.959966357, 1e-6);
  for (std::size_t d = 1; d < 200; ++d) EXPECT_GT(t95(d), t95(d + 1)) << "dof=" << d;
}

TEST(StatsMeanCi, MatchesHandComputedTInterval) {
  const std::vector<double> s = {9.8, 10.2, 10.4, 9.9, 10.0, 10.1};
  // mean 10.0667, stdev 0.216025 (sum of squares 0.233333 / 5), t(5) = 2.570582:
  // half width 2.570582 * 0.216025 / sqrt(6) = 0.226704 -> [9.839963, 10.293371].
  double lo = 0, hi = 0;
  mean_ci95(s, lo, hi);
  EXPECT_NEAR(lo, 9.839962657906806, 1e-8);
  EXPECT_NEAR(hi, 10.293370675426527, 1e-8);
}

TEST(StatsMannWhitney, SeparatedSamplesAreSignificant) {
  const std::vector<double> a = {1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.00};
  const std::vector<double> b = {2.00, 2.05, 1.95, 2.02, 1.98, 2.01, 1.99, 2.03};
  const MannWhitney r = mann_whitney(a, b);
  EXPECT_DOUBLE_EQ(r.u, 0);  // every a is below every b
  EXPECT_LT(r.z, 0);
  EXPECT_LT(r.p_value, 0.01);
  EXPECT_DOUBLE_EQ(mann_whitney(b, a).u, 64);  // n1 n2 - 0
}

TEST(StatsMannWhitney, IdenticalSamplesAreNot) {
  const std::vector<double> a = {1.0, 1.1, 1.2, 1.3, 1.4};
  EXPECT_NEAR(mann_whitney(a, a).p_value, 1.0, 1e-12);
  const std::vector<double> c = {3, 3, 3, 3};
  const MannWhitney r = mann_whitney(c, c);  // all tied: zero variance, defined as p = 1
  EXPECT_DOUBLE_EQ(r.p_value, 1);
  EXPECT_DOUBLE_EQ(r.z, 0);
}

TEST(StatsMannWhitney, PublishedExampleWithTies) {
  // DolphinDB's mannWhitneyUTest(5 1 4 3 5, 2 4 7 -1 0 4) documents p = 0.518023 (two-sided,
  // continuity-corrected). By hand: pooled ranks -1:1 0:2 1:3 2:4 3:5 4,4,4:7 5,5:9.5 7:11;
  // R(a) = 3+5+7+9.5+9.5 = 34, U(a) = 34 - 15 = 19, mu = 15; ties (3, 2) give sum t^3-t = 30,
  // var = 30/12 * (12 - 30/110) = 29.318182, z = (19 - 15 - 0.5) / 5.414636 = 0.646397,
  // p = erfc(z / sqrt 2) = 0.518022.
  const std::vector<double> a = {5, 1, 4, 3, 5};
  const std::vector<double> b = {2, 4, 7, -1, 0, 4};
  const MannWhitney r = mann_whitney(a, b);
  EXPECT_DOUBLE_EQ(r.u, 19);
  EXPECT_NEAR(r.z, 0.6463972906536205, 1e-9);
  EXPECT_NEAR(r.p_value, 0.518023, 2e-6);
  const MannWhitney swapped = mann_whitney(b, a);
  EXPECT_DOUBLE_EQ(swapped.u, 11);
  EXPECT_NEAR(swapped.z, -r.z, 1e-12);
  EXPECT_NEAR(swapped.p_value, r.p_value, 1e-12);
}

TEST(StatsRatio, BootstrapIsDeterministicAndCoversTrueRatio) {
  // b ~ 1.0, a ~ 2.0 (a few percent spread): true ratio of medians 2.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> jitter(-0.03, 0.03);
  std::vector<double> a, b;
  for (int i = 0; i < 15; ++i) {
    a.push_back(2.0 * (1 + jitter(rng)));
    b.push_back(1.0 * (1 + jitter(rng)));
  }
  const Ratio r1 = ratio_of_medians(a, b);
  const Ratio r2 = ratio_of_medians(a, b);
  EXPECT_EQ(r1.value, r2.value);
  EXPECT_EQ(r1.lo, r2.lo);
  EXPECT_EQ(r1.hi, r2.hi);
  EXPECT_DOUBLE_EQ(r1.value, median(a) / median(b));
  EXPECT_LE(r1.lo, 2.0);
  EXPECT_GE(r1.hi, 2.0);
  EXPECT_GT(r1.lo, 1.0);  // clearly separated: the interval excludes 1
  EXPECT_LE(r1.lo, r1.value);
  EXPECT_GE(r1.hi, r1.value);
}

TEST(StatsRatio, BadInputThrows) {
  const std::vector<double> a = {1, 2}, empty;
  EXPECT_THROW(ratio_of_medians(a, empty), std::invalid_argument);
  EXPECT_THROW(ratio_of_medians(a, a, 0), std::invalid_argument);
}

TEST(StatsAmdahl, FitRecoversExactSerialFraction) {
  const std::vector<double> p = {1, 2, 4, 8};
  std::vector<double> s;
  for (double w : p) s.push_back(amdahl_speedup(0.1, w));
  EXPECT_NEAR(amdahl_fit(p, s), 0.1, 1e-12);
}

TEST(StatsAmdahl, FitRecoversSerialFractionFromNoisyTimings) {
  // T(p) = T1 (f + (1-f)/p), each timing off by up to +-2%. Even the worst case of that noise
  // moves the least-squares f by at most ~0.018, so the bound holds for any seed.
  const double f = 0.1, t1 = 3.7;
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> noise(-0.02, 0.02);
  const std::vector<double> p = {1, 2, 4, 8};
  std::vector<double> t;
  for (double w : p) t.push_back(t1 * (f + (1 - f) / w) * (1 + noise(rng)));
  std::vector<double> s;
  for (double ti : t) s.push_back(t[0] / ti);
  EXPECT_NEAR(amdahl_fit(p, s), f, 0.02);
}

TEST(StatsAmdahl, FitEdgeCases) {
  const std::vector<double> ones = {1, 1}, s = {1, 1.01};
  EXPECT_DOUBLE_EQ(amdahl_fit(ones, s), -1);  // no point with p > 1
  const std::vector<double> p = {2, 4};
  const std::vector<double> superlinear = {2.5, 5.0};
  EXPECT_DOUBLE_EQ(amdahl_fit(p, superlinear), 0);  // clamped
  const std::vector<double> slowdown = {0.5, 0.4};
  EXPECT_DOUBLE_EQ(amdahl_fit(p, slowdown), 1);  // clamped
  const std::vector<double> short_s = {2};
  EXPECT_THROW(amdahl_fit(p, short_s), std::invalid_argument);
}

TEST(StatsModels, SpeedupModelsAndKarpFlatt) {
  EXPECT_DOUBLE_EQ(amdahl_speedup(0, 8), 8);
  EXPECT_DOUBLE_EQ(amdahl_speedup(1, 8), 1);
  EXPECT_NEAR(amdahl_speedup(0.1, 4), 1 / 0.325, 1e-12);
  EXPECT_NEAR(gustafson_speedup(0.1, 8), 7.3, 1e-12);
  EXPECT_DOUBLE_EQ(gustafson_speedup(0, 16), 16);
  for (double f : {0.0, 0.05, 0.1, 0.5}) {
    for (double p : {2.0, 4.0, 8.0, 64.0}) {
      EXPECT_NEAR(karp_flatt(amdahl_speedup(f, p), p), f, 1e-12) << "f=" << f << " p=" << p;
    }
  }
  EXPECT_TRUE(std::isnan(karp_flatt(1, 1)));
}

}  // namespace
}  // namespace concurdl
