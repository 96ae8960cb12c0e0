// The pieces of asynchronous training, alone: the staleness log, the parameter server (one push
// is one nn::Sgd step; concurrent pushes are never lost and versions are counted exactly), the
// SSP clock (no worker ever starts a step more than s ahead of the slowest, at 1/2/4/8
// workers) and Hogwild's lock-free update (alone, exactly nn::Sgd's step; concurrently, clean
// under ThreadSanitizer, and the updates it loses are counted, not hidden).
//   ch07_tests --gtest_filter='ParameterServer*:Ssp*:Staleness*:Hogwild*'
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/asgd/hogwild.hpp"
#include "concurdl/asgd/parameter_server.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/nn/sgd.hpp"

namespace {

using namespace concurdl::asgd;
using concurdl::testing::within_seconds;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 101) - 1.0f;
  return v;
}

TEST(StalenessLog, CountsMeanMaxAndQuantiles) {
  StalenessLog log;
  for (std::uint64_t s : {0, 0, 1, 2, 2, 2, 100}) log.add(s);
  EXPECT_EQ(log.count(), 7u);
  EXPECT_EQ(log.max(), 100u);
  EXPECT_DOUBLE_EQ(log.mean(), 107.0 / 7.0);
  EXPECT_EQ(log.bucket(2), 3u);
  EXPECT_EQ(log.bucket(StalenessLog::kExact), 1u);
  EXPECT_EQ(log.quantile(0.5), 2u);
  EXPECT_EQ(log.quantile(1.0), 100u);
  std::map<std::string, double> m;
  log.add_to(m);
  EXPECT_DOUBLE_EQ(m.at("staleness_hist_0"), 2.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.at("staleness_hist_2"), 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.at("staleness_hist_64plus"), 1.0 / 7.0);
  EXPECT_EQ(m.count("staleness_hist_3"), 0u) << "only the staleness values seen";
  EXPECT_EQ(m.at("staleness_max"), 100.0);
  log.reset();
  EXPECT_EQ(log.count(), 0u);
  EXPECT_EQ(log.mean(), 0.0);
}

// One push is one nn::Sgd step, bit for bit, however many shards the server has.
TEST(ParameterServer, APushIsOneSgdStepWhateverTheShards) {
  const std::size_t n = 1003;
  const std::vector<float> p0 = ramp(n, 0.01f), g1 = ramp(n, 0.003f), g2 = ramp(n, -0.002f);
  const nn::SgdOptions opt{0.1f, 0.9f, 1e-3f};
  std::vector<float> ref = p0;
  nn::Sgd sgd(n, opt);
  sgd.step(ref, g1);
  sgd.step(ref, g2);
  for (int shards : {1, 3, 7}) {
    ParameterServer ps(p0, opt, shards);
    std::vector<float> pulled(n);
    EXPECT_EQ(ps.pull(pulled), 0u);
    EXPECT_EQ(ps.push(g1, 0), 0u);
    EXPECT_EQ(ps.push(g2, 0), 1u) << "one push landed since version 0";
    EXPECT_EQ(ps.version(), 2u);
    EXPECT_EQ(ps.pull(pulled), 2u);
    EXPECT_EQ(std::memcmp(pulled.data(), ref.data(), n * sizeof(float)), 0) << shards << " shards";
  }
}

// Pushes from many threads at once: none is lost (each adds exactly 1 to every parameter, in
// exact float arithmetic), the version counts them all, and no staleness exceeds the pushes.
class ParameterServerThreads : public ::testing::TestWithParam<int> {};

TEST_P(ParameterServerThreads, ConcurrentPushesAreNeverLost) {
  const int threads = GetParam();
  constexpr int kPushes = 300;
  const std::size_t n = 4096;
  within_seconds(kDeadline, [&] {
    for (int shards : {1, 4}) {
      ParameterServer ps(std::vector<float>(n, 0.0f), nn::SgdOptions{1.0f, 0.0f, 0.0f}, shards);
      const std::vector<float> minus_one(n, -1.0f);
      std::atomic<std::uint64_t> worst{0};
      {
        std::vector<std::jthread> team;
        for (int t = 0; t < threads; ++t)
          team.emplace_back([&] {
            std::vector<float> mine(n);
            for (int i = 0; i < kPushes; ++i) {
              const std::uint64_t v = ps.pull(mine);
              const std::uint64_t s = ps.push(minus_one, v);
              std::uint64_t w = worst.load();
              while (s > w && !worst.compare_exchange_weak(w, s)) {
              }
            }
          });
      }
      const std::uint64_t total = static_cast<std::uint64_t>(threads) * kPushes;
      EXPECT_EQ(ps.version(), total);
      EXPECT_LT(worst.load(), total);
      if (threads == 1) {
        EXPECT_EQ(worst.load(), 0u);
      }
      std::vector<float> out(n);
      ps.pull(out);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i], static_cast<float>(total)) << "parameter " << i << ", " << shards;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Threads, ParameterServerThreads, ::testing::Values(1, 2, 4, 8));

// SSP: every wait_turn returns a lead within the bound, on every step of every worker; every
// worker finishes (a worker that leaves does not hold the others back).
class SspThreads : public ::testing::TestWithParam<int> {};

TEST_P(SspThreads, NoWorkerIsEverMoreThanTheBoundAhead) {
  const int workers = GetParam();
  within_seconds(kDeadline, [&] {
    for (std::uint64_t bound : {0u, 1u, 3u}) {
      SspClock clock(workers, bound);
      std::atomic<std::uint64_t> violations{0}, steps{0};
      {
        std::vector<std::jthread> team;
        for (int w = 0; w < workers; ++w)
          team.emplace_back([&, w] {
            // Unequal work: worker w takes 50 + 40 w steps, the slower ones spin longer.
            const int mine = 50 + 40 * w;
            for (int i = 0; i < mine; ++i) {
              const std::uint64_t lead = clock.wait_turn(w);
              if (lead > bound) violations.fetch_add(1);
              volatile double x = 0;
              for (int k = 0; k < 200 * (workers - w); ++k) x = x + 1.0;
              steps.fetch_add(1);
              clock.advance(w);
            }
            clock.leave(w);
          });
      }
      EXPECT_EQ(violations.load(), 0u) << "bound " << bound;
      EXPECT_LE(clock.max_lead(), bound);
      std::uint64_t expect = 0;
      for (int w = 0; w < workers; ++w) expect += 50 + 40 * static_cast<std::uint64_t>(w);
      EXPECT_EQ(steps.load(), expect);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Threads, SspThreads, ::testing::Values(1, 2, 4, 8));

TEST(Hogwild, AloneItIsExactlyOneSgdStep) {
  const std::size_t n = 777;
  const nn::SgdOptions opt{0.05f, 0.9f, 5e-4f};
  std::vector<float> p = ramp(n, 0.02f), v(n, 0.0f), ref = p;
  nn::Sgd sgd(n, opt);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = ramp(n, 0.001f * static_cast<float>(step + 1));
    sgd.step(ref, g);
    hogwild_step(p, v, g, opt);
  }
  EXPECT_EQ(std::memcmp(p.data(), ref.data(), n * sizeof(float)), 0);
  std::vector<float> read(n);
  hogwild_read(p, read);
  EXPECT_EQ(read, p);
}

// Many threads update one shared vector without a lock. Each update adds 1 to every element;
// a racing pair may lose one of its additions (load, add, store is not one atomic step), so the
// final value is at most the updates made (and at least 1: the last store is a load plus one).
// Clean under TSan: every access is atomic.
class HogwildThreads : public ::testing::TestWithParam<int> {};

TEST_P(HogwildThreads, LostUpdatesAreBoundedAndTheRunIsRaceFree) {
  const int threads = GetParam();
  constexpr int kUpdates = 200;
  const std::size_t n = 2048;
  within_seconds(kDeadline, [&] {
    std::vector<float> p(n, 0.0f), v(n, 0.0f);
    const std::vector<float> minus_one(n, -1.0f);
    const nn::SgdOptions opt{1.0f, 0.0f, 0.0f};
    {
      std::vector<std::jthread> team;
      for (int t = 0; t < threads; ++t)
        team.emplace_back([&] {
          std::vector<float> local(n);
          for (int i = 0; i < kUpdates; ++i) {
            hogwild_read(p, local);
            hogwild_step(p, v, minus_one, opt);
          }
        });
    }
    double lost = 0;
    for (float x : p) {
      ASSERT_LE(x, static_cast<float>(threads * kUpdates));
      ASSERT_GE(x, 1.0f);
      lost += threads * kUpdates - x;
    }
    if (threads == 1) {
      EXPECT_EQ(lost, 0.0);
    }
    RecordProperty("lost_updates", std::to_string(lost));
  });
}

INSTANTIATE_TEST_SUITE_P(Threads, HogwildThreads, ::testing::Values(1, 2, 4, 8));

}  // namespace
