// Chapter 07's exercises through the checks their references pass. Each suite is typed over the
// chapter's own class (or function) and the student's, so both meet the same tests; while a
// stub still has CDL_TODO, its tests are skipped as "not attempted". Concurrent checks run at
// 1, 2, 4 and 8 threads, and every test under a deadline (finishes_within below).
//   7.1 ParameterServer vs StudentParameterServer (exercises/student_ps.hpp)
//       ch07_tests --gtest_filter='PushPullEx7_1/student.*'
//   7.2 SspClock vs StudentSspClock (exercises/student_ssp.hpp): test_exercise_ssp.cpp
//       ch07_tests --gtest_filter='BoundedWaitEx7_2/student.*'
//   7.3 hogwild_step vs student_hogwild_step (exercises/student_hogwild.hpp)
//       ch07_tests --gtest_filter='LockFreeStepEx7_3/student.*'
// (what `concurdl exercise ch07` runs; '*Ex7*' runs the references' instances too).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../exercises/student_hogwild.hpp"
#include "../exercises/student_ps.hpp"
#include "concurdl/asgd/hogwild.hpp"
#include "concurdl/asgd/parameter_server.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/nn/sgd.hpp"
#include "exercise_util.hpp"

namespace {

using namespace concurdl::asgd;
namespace nn = concurdl::nn;
using namespace std::chrono_literals;
using namespace ch07_exercises;

// Hogwild's step as a type, so that its suite is typed like the other two.
struct ReferenceHogwild {
  static void step(std::span<float> p, std::span<float> v, std::span<const float> g,
                   const nn::SgdOptions& o) {
    hogwild_step(p, v, g, o);
  }
};
struct StudentHogwild {
  static void step(std::span<float> p, std::span<float> v, std::span<const float> g,
                   const nn::SgdOptions& o) {
    student_hogwild_step(p, v, g, o);
  }
};

// --- 7.1 the parameter server ----------------------------------------------------------------

// One push is one nn::Sgd step, bit for bit, however many shards; versions and staleness count
// the pushes; set_lr reaches every shard.
template <class Server>
void push_is_one_sgd_step() {
  const std::size_t n = 1003;
  const std::vector<float> p0 = ramp(n, 0.01f), g1 = ramp(n, 0.003f), g2 = ramp(n, -0.002f),
                           g3 = ramp(n, 0.0007f);
  const nn::SgdOptions opt{0.1f, 0.9f, 1e-3f};
  std::vector<float> ref = p0;
  nn::Sgd sgd(n, opt);
  sgd.step(ref, g1);
  sgd.step(ref, g2);
  sgd.set_lr(0.05f);
  sgd.step(ref, g3);
  for (int shards : {1, 3, 7}) {
    SCOPED_TRACE(::testing::Message() << shards << " shards");
    Server ps(p0, opt, shards);
    EXPECT_EQ(ps.size(), n);
    EXPECT_EQ(ps.shards(), shards);
    std::vector<float> pulled(n);
    EXPECT_EQ(ps.pull(pulled), 0u);
    EXPECT_EQ(pulled, p0);
    EXPECT_EQ(ps.push(g1, 0), 0u);
    EXPECT_EQ(ps.push(g2, 0), 1u) << "one push landed since version 0";
    ps.set_lr(0.05f);
    EXPECT_EQ(ps.push(g3, 2), 0u) << "pulled at version 2, pushed as the next";
    EXPECT_EQ(ps.version(), 3u);
    EXPECT_EQ(ps.pull(pulled), 3u);
    EXPECT_EQ(std::memcmp(pulled.data(), ref.data(), n * sizeof(float)), 0)
        << "three pushes differ from three nn::Sgd steps";
  }
}

template <class Server>
void refuses_wrong_sizes_and_shard_counts() {
  const std::vector<float> p0(10, 1.0f);
  Server ps(p0, nn::SgdOptions{}, 2);
  std::vector<float> nine(9), eleven(11);
  EXPECT_THROW(ps.pull(nine), std::invalid_argument);
  EXPECT_THROW(ps.push(eleven, 0), std::invalid_argument);
  EXPECT_EQ(ps.version(), 0u) << "a refused push was counted";
  EXPECT_EQ(ps.push(std::vector<float>(10, 0.0f), 1000), 0u)
      << "a version from the future: staleness 0";
  EXPECT_THROW(Server none(p0, nn::SgdOptions{}, 0), std::invalid_argument);
  EXPECT_THROW(Server too_many(p0, nn::SgdOptions{}, 11), std::invalid_argument);
  EXPECT_NO_THROW(Server one_each(p0, nn::SgdOptions{}, 10));
}

// Pushes from `threads` threads at once: none is lost (each adds exactly 1 to every parameter,
// in exact float arithmetic), the version counts them all, no staleness reaches the pushes
// made, every pull holds at least the pushes its version says, and with one shard a pull is
// one moment's copy (every element equal).
template <class Server>
void concurrent_pushes_are_never_lost(int threads) {
  constexpr int kPushes = 300;
  constexpr std::size_t n = 4096;
  for (int shards : {1, 4}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads, " << shards << " shards");
    Server ps(std::vector<float>(n, 0.0f), nn::SgdOptions{1.0f, 0.0f, 0.0f}, shards);
    const std::vector<float> minus_one(n, -1.0f);
    std::atomic<std::uint64_t> worst{0}, behind{0}, mixed{0};
    run_team(threads, [&](int) {
      std::vector<float> mine(n);
      for (int i = 0; i < kPushes; ++i) {
        const std::uint64_t v = ps.pull(mine);
        for (float x : mine) {
          if (x < static_cast<float>(v)) behind.fetch_add(1);
          if (shards == 1 && x != mine[0]) mixed.fetch_add(1);
        }
        const std::uint64_t s = ps.push(minus_one, v);
        std::uint64_t w = worst.load();
        while (s > w && !worst.compare_exchange_weak(w, s)) {
        }
      }
    });
    const std::uint64_t total = static_cast<std::uint64_t>(threads) * kPushes;
    EXPECT_EQ(ps.version(), total);
    EXPECT_LT(worst.load(), total);
    if (threads == 1) {
      EXPECT_EQ(worst.load(), 0u) << "one worker: nothing lands in between";
    }
    EXPECT_EQ(behind.load(), 0u) << "pulled elements held fewer pushes than the version the pull "
                                    "returned (a push counted before it was in, or lost?)";
    EXPECT_EQ(mixed.load(), 0u) << "one shard, yet a pull copied parts of different versions";
    std::vector<float> out(n);
    EXPECT_EQ(ps.pull(out), total);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], static_cast<float>(total)) << "parameter " << i << ": pushes lost";
  }
}

template <class Server>
class PushPullEx7_1 : public ::testing::Test {};
using Servers = ::testing::Types<ParameterServer, StudentParameterServer>;
TYPED_TEST_SUITE(PushPullEx7_1, Servers, ImplNames);

TYPED_TEST(PushPullEx7_1, APushIsOneSgdStepWhateverTheShards) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, push_is_one_sgd_step<TypeParam>)));
}

TYPED_TEST(PushPullEx7_1, RefusesWrongSizesAndShardCounts) {
  CDL_TRY_EXERCISE(
      ASSERT_TRUE(finishes_within(kDeadline, refuses_wrong_sizes_and_shard_counts<TypeParam>)));
}

TYPED_TEST(PushPullEx7_1, ConcurrentPushesAreNeverLost) {
  for (int threads : kThreadCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(
        kDeadline, [threads] { concurrent_pushes_are_never_lost<TypeParam>(threads); })));
}

// --- 7.3 Hogwild's update --------------------------------------------------------------------

template <class Step>
void alone_it_is_exactly_one_sgd_step() {
  const std::size_t n = 777;
  const nn::SgdOptions opt{0.05f, 0.9f, 5e-4f};
  std::vector<float> p = ramp(n, 0.02f), v(n, 0.0f), ref = p;
  nn::Sgd sgd(n, opt);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = ramp(n, 0.001f * static_cast<float>(step + 1));
    sgd.step(ref, g);
    Step::step(p, v, g, opt);
  }
  EXPECT_EQ(std::memcmp(p.data(), ref.data(), n * sizeof(float)), 0) << "parameters";
  EXPECT_EQ(std::memcmp(v.data(), sgd.velocity().data(), n * sizeof(float)), 0) << "velocity";
}

template <class Step>
void refuses_mismatched_sizes() {
  std::vector<float> p(8, 1.0f), v(8, 0.0f), g(8, 0.5f), seven(7);
  const nn::SgdOptions opt{};
  Step::step(p, v, g, opt);
  EXPECT_THROW(Step::step(seven, v, g, opt), std::invalid_argument);
  EXPECT_THROW(Step::step(p, seven, g, opt), std::invalid_argument);
  EXPECT_THROW(Step::step(p, v, seven, opt), std::invalid_argument);
  EXPECT_NO_THROW(Step::step({}, {}, {}, opt)) << "no parameters: nothing to do";
}

// `threads` threads update one shared vector without a lock. Each update adds 1 to every
// element (lr 1, no momentum, gradient -1); a racing pair may lose one of its additions (load,
// add, store is not one atomic step), so every element ends a whole number between 1 and the
// updates made (at least 1: the last store is a load plus one); alone, exactly the updates
// made. The velocity is -1 throughout. Returns the updates lost. Race-free only if
// ThreadSanitizer says so.
template <class Step>
double lost_updates_are_bounded(int threads) {
  constexpr int kUpdates = 200;
  constexpr std::size_t n = 2048;
  SCOPED_TRACE(::testing::Message() << threads << " threads");
  std::vector<float> p(n, 0.0f), v(n, 0.0f);
  const std::vector<float> minus_one(n, -1.0f);
  const nn::SgdOptions opt{1.0f, 0.0f, 0.0f};
  {  // on this thread first: a stub throws here, not on a worker
    std::vector<float> p1(1, 0.0f), v1(1, 0.0f);
    Step::step(p1, v1, std::span<const float>(minus_one).first(1), opt);
    EXPECT_EQ(p1[0], 1.0f);
  }
  run_team(threads, [&](int) {
    std::vector<float> local(n);
    for (int i = 0; i < kUpdates; ++i) {
      hogwild_read(p, local);
      Step::step(p, v, minus_one, opt);
    }
  });
  const auto made = static_cast<float>(threads * kUpdates);
  double lost = 0;
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_LE(p[i], made) << "element " << i;
    EXPECT_GE(p[i], 1.0f) << "element " << i;
    EXPECT_EQ(p[i], std::floor(p[i])) << "element " << i << ": not a count of updates";
    EXPECT_EQ(v[i], -1.0f) << "velocity " << i;
    if (::testing::Test::HasFailure()) break;
    lost += made - p[i];
  }
  if (threads == 1) {
    EXPECT_EQ(lost, 0.0) << "one thread loses nothing";
  }
  return lost;
}

template <class Step>
class LockFreeStepEx7_3 : public ::testing::Test {};
using Steps = ::testing::Types<ReferenceHogwild, StudentHogwild>;
TYPED_TEST_SUITE(LockFreeStepEx7_3, Steps, ImplNames);

TYPED_TEST(LockFreeStepEx7_3, AloneItIsExactlyOneSgdStep) {
  CDL_TRY_EXERCISE(
      ASSERT_TRUE(finishes_within(kDeadline, alone_it_is_exactly_one_sgd_step<TypeParam>)));
}

TYPED_TEST(LockFreeStepEx7_3, RefusesMismatchedSizes) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, refuses_mismatched_sizes<TypeParam>)));
}

// The updates lost are recorded as lost_updates_<T>threads in the JSON report.
TYPED_TEST(LockFreeStepEx7_3, LostUpdatesAreBoundedAtEveryThreadCount) {
  for (int threads : kThreadCounts) {
    const auto lost = std::make_shared<double>(0);
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(
        kDeadline, [threads, lost] { *lost = lost_updates_are_bounded<TypeParam>(threads); })));
    this->RecordProperty("lost_updates_" + std::to_string(threads) + "threads",
                         std::to_string(static_cast<long long>(*lost)));
  }
}

}  // namespace
