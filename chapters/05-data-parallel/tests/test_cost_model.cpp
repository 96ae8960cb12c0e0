// The α–β model of cost_model.hpp: the fit reads α from the smallest size and β from the
// largest, whatever the cache-resident sizes between them do; the link a fit implies gives back
// the measured times at the fitted rank count; and the data-parallel step adds (or overlaps)
// the ring all-reduce of the gradient to one worker's step.
//   ch05_tests --gtest_filter='CostModel*'
#include <gtest/gtest.h>

#include <vector>

#include "concurdl/dp/cost_model.hpp"

namespace {

using namespace concurdl::dp;

constexpr double kA = 10e-6;  // seconds
constexpr double kB = 1e-10;  // seconds per byte (10 GB/s)
constexpr double kMiB = 1 << 20;

TEST(CostModelFit, TakesAlphaFromTheSmallestSizeAndBetaFromTheLargest) {
  // On the line at 4 KiB and 64 MiB; the sizes between run 5x faster than it (in cache), as
  // the threads ring's 256 KiB and 4 MiB did. They must not pull the line off the ends.
  const std::vector<double> bytes = {4096, 256 * 1024, 4 * kMiB, 64 * kMiB};
  std::vector<double> seconds;
  for (double n : bytes) seconds.push_back(kA + kB * n);
  seconds[1] /= 5;
  seconds[2] /= 5;
  const auto f = fit_time_vs_bytes(bytes, seconds);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->a, kA, 1e-12);
  EXPECT_NEAR(f->b, kB, 1e-18);
  EXPECT_EQ(f->points, 4);
  EXPECT_NEAR(f->a + f->b * bytes.back(), seconds.back(), 1e-12) << "exact at the largest size";
  EXPECT_NEAR(f->a + f->b * bytes.front(), seconds.front(), 1e-12) << "exact at the smallest";
}

TEST(CostModelFit, OrderDoesNotMatterAndRepeatedSizesAreAveraged) {
  const std::vector<double> bytes = {64 * kMiB, 4096, 64 * kMiB, 4096};
  const std::vector<double> seconds = {kA + kB * 64 * kMiB - 1e-3, kA + kB * 4096 - 2e-6,
                                       kA + kB * 64 * kMiB + 1e-3, kA + kB * 4096 + 2e-6};
  const auto f = fit_time_vs_bytes(bytes, seconds);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->a, kA, 1e-12);
  EXPECT_NEAR(f->b, kB, 1e-18);
}

TEST(CostModelFit, NeedsTwoSizesAndALargestSizeThatIsSlowest) {
  EXPECT_FALSE(fit_time_vs_bytes(std::vector<double>{4096}, std::vector<double>{1e-5}));
  EXPECT_FALSE(fit_time_vs_bytes(std::vector<double>{4096, 4096}, std::vector<double>{1e-5, 2e-5}));
  EXPECT_FALSE(fit_time_vs_bytes(std::vector<double>{4096, 1e6}, std::vector<double>{1e-3, 1e-4}))
      << "a largest size faster than the smallest has no bandwidth term to read";
  EXPECT_FALSE(fit_time_vs_bytes(std::vector<double>{4096, 1e6}, std::vector<double>{0, 0}))
      << "times of 0 are not measurements";
}

// The link a fit at p ranks implies, put back into the formula at p, is the fitted line.
TEST(CostModelFit, TheImpliedLinkGivesBackTheLineAtTheFittedRanks) {
  const LineFit f{.a = kA, .b = kB, .points = 2};
  for (const char* algorithm : {"v1_naive", "v2_tree", "v3_halving_doubling", "v4_ring"})
    for (double p : {2.0, 3.0, 4.0, 8.0}) {
      const auto link = link_from_fit(algorithm, p, f);
      ASSERT_TRUE(link) << algorithm;
      for (double n : {4096.0, 64 * kMiB}) {
        const auto t = allreduce_time(algorithm, p, n, *link);
        ASSERT_TRUE(t);
        EXPECT_NEAR(*t, kA + kB * n, 1e-9 * (kA + kB * n)) << algorithm << " p=" << p;
      }
    }
  EXPECT_FALSE(link_from_fit("native", 2, f));
  EXPECT_FALSE(link_from_fit("v4_ring", 1, f));
}

TEST(CostModelStep, AddsTheRingAllReduceOrOverlapsIt) {
  constexpr double kCompute = 636e-6;
  constexpr double kGradient = 235146 * 4.0;
  // One worker: no all-reduce at all.
  EXPECT_DOUBLE_EQ(dp_step_time(kCompute, 1, kGradient, kLink25GBs, false), kCompute);
  // Two workers on 25 GB/s: 2 messages of alpha, and the gradient once each way at half size.
  const double ring2 = 2 * 2e-6 + kGradient / 25e9;
  EXPECT_NEAR(dp_step_time(kCompute, 2, kGradient, kLink25GBs, false), kCompute + ring2, 1e-12);
  EXPECT_DOUBLE_EQ(dp_step_time(kCompute, 2, kGradient, kLink25GBs, true), kCompute);
  // 1024 workers on 100 Gb/s Ethernet: the ring's 2(p-1) alpha terms outgrow the compute, and
  // then even perfect overlap leaves the all-reduce's time.
  const double ring1024 = 2 * 1023 * 20e-6 + 2.0 * 1023 / 1024 * kGradient / 12.5e9;
  EXPECT_NEAR(dp_step_time(kCompute, 1024, kGradient, kLink100GbE, false), kCompute + ring1024,
              1e-12);
  EXPECT_NEAR(dp_step_time(kCompute, 1024, kGradient, kLink100GbE, true), ring1024, 1e-12);
}

}  // namespace

namespace {

// The hierarchical model: one host is a ring over the host's link alone; one rank a host is a
// ring across hosts; in between, the bytes across hosts fall by the ranks a host.
TEST(CostModelHierarchical, ReducesToTheRingAtTheEnds) {
  using namespace concurdl::dp;
  const Link local{"local", 1e-6, 1 / 100e9}, cross{"cross", 20e-6, 1 / 1e9};
  const double n = 64e6;
  EXPECT_NEAR(hierarchical_allreduce_time(4, 1, n, local, cross),
              *allreduce_time("v4_ring", 4, n, local), 1e-12);
  EXPECT_NEAR(hierarchical_allreduce_time(1, 8, n, local, cross),
              *allreduce_time("v4_ring", 8, n, cross), 1e-12);
  // 2 hosts of 4: the cross-host term carries n/4.
  const double h = hierarchical_allreduce_time(4, 2, n, local, cross);
  const double cross_part = *allreduce_time("v4_ring", 2, n / 4, cross);
  EXPECT_NEAR(h, cross_part + *allreduce_time("v4_ring", 4, n, local), 1e-12);
  EXPECT_LT(h, *allreduce_time("v4_ring", 8, n, cross));
  // The 4 ranks of a host share its one link: the cross term is 4x slower per byte.
  const double shared = hierarchical_allreduce_time(4, 2, n, local, cross, 4);
  const Link slow{"cross/4", cross.alpha_s, 4 * cross.beta_s_per_byte};
  EXPECT_NEAR(shared,
              *allreduce_time("v4_ring", 2, n / 4, slow) + *allreduce_time("v4_ring", 4, n, local),
              1e-12);
}

}  // namespace
