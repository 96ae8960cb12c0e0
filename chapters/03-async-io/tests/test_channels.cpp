// The channels between producers and the consumer (channel.hpp): BoundedQueue and the
// ReorderBuffer of exercise 3.3, reference and student through the same tests. Items arrive
// from several threads in any order and leave in index order; the window bounds what waits;
// close() wakes every blocked put and take; fail() reaches the consumer. Every test runs under a
// watchdog, so a lost wake-up fails in seconds instead of hanging.
//   ch03_tests --gtest_filter='Channel*:ReorderTyped*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "concurdl/async_io/channel.hpp"
#include "concurdl/async_io/sampler.hpp"
#include "concurdl/core/testing.hpp"
#include "exercises/student_reorder.hpp"

namespace {

using namespace concurdl::async_io;
using concurdl::testing::within_seconds;
using namespace std::chrono_literals;

TEST(ChannelQueue, BoundedAndDrainedAfterFinish) {
  within_seconds(20, [] {
    BoundedQueue<int> q(2);
    EXPECT_TRUE(q.put(0, 1));
    EXPECT_TRUE(q.put(1, 2));
    std::atomic<bool> third{false};
    std::jthread producer([&] {
      q.put(2, 3);  // blocks: the queue holds two
      third = true;
      q.finish();
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(third.load()) << "put did not block on a full queue";
    EXPECT_EQ(q.take(), 1);
    EXPECT_EQ(q.take(), 2);
    EXPECT_EQ(q.take(), 3);
    EXPECT_EQ(q.take(), std::nullopt);
    EXPECT_EQ(q.take(), std::nullopt);
  });
}

TEST(ChannelQueue, CloseWakesBothSides) {
  within_seconds(20, [] {
    BoundedQueue<int> q(1);
    q.put(0, 1);
    std::jthread blocked_put([&] { EXPECT_FALSE(q.put(1, 2)); });
    BoundedQueue<int> empty(1);
    std::jthread blocked_take([&] { EXPECT_EQ(empty.take(), std::nullopt); });
    std::this_thread::sleep_for(20ms);
    q.close();
    empty.close();
  });
}

TEST(ChannelQueue, FailReachesTheConsumer) {
  BoundedQueue<int> q(4);
  q.fail(std::make_exception_ptr(std::runtime_error("disk on fire")));
  EXPECT_THROW(q.take(), std::runtime_error);
}

// Closes a channel when a test leaves early (a failed ASSERT), so that producers blocked in
// put() wake and can be joined instead of hanging the test binary.
template <class C>
struct CloseOnExit {
  C& channel;
  ~CloseOnExit() { channel.close(); }
};

template <class T>
class ReorderTyped : public ::testing::Test {};
struct ReorderNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, ReorderBuffer<int>> ? "reference" : "student";
  }
};
using ReorderImpls = ::testing::Types<ReorderBuffer<int>, StudentReorderBuffer<int>>;
TYPED_TEST_SUITE(ReorderTyped, ReorderImpls, ReorderNames);

TYPED_TEST(ReorderTyped, DeliversInIndexOrderFromManyThreads) {
  for (unsigned producers : {1u, 2u, 4u, 8u}) {
    SCOPED_TRACE(::testing::Message() << producers << " producers");
    CDL_TRY_EXERCISE(within_seconds(30, [producers] {
      constexpr std::uint64_t n = 5000;
      TypeParam buf(4);
      // Producer p puts the indices of its share in a shuffled order of its own.
      std::atomic<unsigned> left{producers};
      std::vector<std::jthread> threads;
      for (unsigned p = 0; p < producers; ++p)
        threads.emplace_back([&, p] {
          // Claim indices in increasing order (as the loaders do), so the window always moves.
          for (std::uint64_t i = p; i < n; i += producers)
            if (!buf.put(i, static_cast<int>(i))) break;
          if (left.fetch_sub(1) == 1) buf.finish();
        });
      CloseOnExit<TypeParam> guard{buf};  // destroyed before `threads` is joined
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::optional<int> v = buf.take();
        ASSERT_TRUE(v.has_value()) << "ended early at " << i;
        ASSERT_EQ(*v, static_cast<int>(i));
      }
      EXPECT_EQ(buf.take(), std::nullopt);
    }));
  }
}

TYPED_TEST(ReorderTyped, OutOfOrderArrivalsWait) {
  CDL_TRY_EXERCISE(within_seconds(20, [] {
    TypeParam buf(8);
    const auto order = random_permutation<std::uint64_t>(8, 17);
    for (std::uint64_t i : order) ASSERT_TRUE(buf.put(i, static_cast<int>(i) * 10));
    buf.finish();
    for (int i = 0; i < 8; ++i) EXPECT_EQ(buf.take(), i * 10);
    EXPECT_EQ(buf.take(), std::nullopt);
  }));
}

TYPED_TEST(ReorderTyped, WindowBlocksItemsTooFarAhead) {
  CDL_TRY_EXERCISE(within_seconds(20, [] {
    TypeParam buf(2);
    std::atomic<bool> put_far{false};
    std::jthread far([&] {
      EXPECT_TRUE(buf.put(2, 2));  // 2 >= next (0) + window (2): must wait
      put_far = true;
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(put_far.load()) << "an item beyond the window was accepted";
    EXPECT_TRUE(buf.put(1, 1));  // inside the window: never blocks
    EXPECT_TRUE(buf.put(0, 0));
    EXPECT_EQ(buf.take(), 0);  // the window moves to [1, 3): index 2 may go in now
    for (int i = 0; i < 500 && !put_far.load(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(put_far.load()) << "the window moved, but the put waiting for it did not go on";
    if (!put_far.load()) buf.close();
    far.join();
    EXPECT_EQ(buf.take(), 1);
    EXPECT_EQ(buf.take(), 2);
  }));
}

TYPED_TEST(ReorderTyped, CloseWakesBlockedPutAndTake) {
  CDL_TRY_EXERCISE(within_seconds(20, [] {
    TypeParam buf(1);
    std::jthread taker([&] { EXPECT_EQ(buf.take(), std::nullopt); });  // item 0 never comes
    std::jthread putter([&] { EXPECT_FALSE(buf.put(5, 5)); });         // far beyond the window
    std::this_thread::sleep_for(30ms);
    buf.close();
  }));
}

TYPED_TEST(ReorderTyped, FailReachesTheConsumer) {
  CDL_TRY_EXERCISE(within_seconds(20, [] {
    TypeParam buf(4);
    std::jthread worker(
        [&] { buf.fail(std::make_exception_ptr(std::runtime_error("bad record"))); });
    EXPECT_THROW(buf.take(), std::runtime_error);
  }));
}

}  // namespace
