// Queues, stacks and the message-passing histogram (queue_variants.hpp, message_passing.hpp),
// over every row of their tables and the student versions of exercises 2.3 and 2.5:
// nothing lost and nothing duplicated (every tagged item producer<<32|seq counted exactly once,
// and count, sum and xor match), each producer's items in order at any one consumer for the FIFO
// queues, at several producer/consumer mixes, with small capacities so that "full" and "empty"
// are hit constantly. Plus the blocking queue's close() semantics and single-threaded contracts.
//   ch02_tests --gtest_filter='Queue*:BlockingQueue*:Ring*:Stack*:Treiber*:MessagePassing*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../exercises/student_queue.hpp"
#include "../exercises/student_stack.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/locks/message_passing.hpp"
#include "concurdl/locks/queue_variants.hpp"

namespace concurdl::locks {
void PrintTo(const MessagePassingVariant& v, std::ostream* os) { *os << v.name; }
}  // namespace concurdl::locks

namespace {

using namespace concurdl::locks;
using concurdl::testing::within_seconds;
using namespace std::chrono_literals;

constexpr int kWatchdogSeconds = 90;
constexpr std::uint64_t kPerProducer = kThreadSanitizer ? 1'000 : 10'000;

// --- MPMC queues -------------------------------------------------------------------------------

struct QueueImpl {
  std::string name;
  MpmcResult (*run)(unsigned, unsigned, std::uint64_t, std::size_t, SeenTable*);
  bool fifo;
  std::string tsan_blind;       // why TSan cannot check this row ("" if it can)
  std::function<void()> probe;  // single-threaded first call: an untouched stub throws here
};
void PrintTo(const QueueImpl& q, std::ostream* os) { *os << q.name; }

std::vector<QueueImpl> queue_rows() {
  std::vector<QueueImpl> rows;
  for (const QueueVariant& v : kQueueVariants)
    rows.push_back({std::string(v.name), v.run, v.order == Order::fifo_per_producer,
                    std::string(v.tsan_blind), nullptr});
  return rows;
}

class QueueSuite : public ::testing::TestWithParam<QueueImpl> {
 protected:
  void SetUp() override {
    if (kThreadSanitizer && !GetParam().tsan_blind.empty())
      GTEST_SKIP() << "ThreadSanitizer would report false races: " << GetParam().tsan_blind
                   << "; this row is tested in the default build";
  }
};

TEST_P(QueueSuite, NothingLostOrDuplicatedAndFifoPerProducer) {
  const QueueImpl& q = GetParam();
  if (q.probe) CDL_TRY_EXERCISE(q.probe());
  within_seconds(kWatchdogSeconds, [&q] {
    struct Mix {
      unsigned producers, consumers;
    };
    for (const Mix m : {Mix{1, 1}, Mix{1, 3}, Mix{3, 1}, Mix{2, 2}, Mix{4, 4}})
      for (std::size_t capacity : {2u, 64u}) {
        SCOPED_TRACE(::testing::Message() << m.producers << " producers, " << m.consumers
                                          << " consumers, capacity " << capacity);
        SeenTable seen(m.producers * kPerProducer);
        const MpmcResult r = q.run(m.producers, m.consumers, kPerProducer, capacity, &seen);
        const MpmcResult want = expected_items(m.producers, kPerProducer);
        EXPECT_EQ(r.count, want.count);
        EXPECT_EQ(r.sum, want.sum);
        EXPECT_EQ(r.xr, want.xr);
        std::uint64_t lost = 0, duplicated = 0;
        for (const auto& s : seen) {
          lost += s.load() == 0;
          duplicated += s.load() > 1;
        }
        EXPECT_EQ(lost, 0u);
        EXPECT_EQ(duplicated, 0u);
        if (q.fifo) {
          EXPECT_EQ(r.out_of_order, 0u) << "an item overtook an earlier one of its producer";
        }
      }
  });
}

std::string impl_name(const ::testing::TestParamInfo<QueueImpl>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Queues, QueueSuite, ::testing::ValuesIn(queue_rows()), impl_name);
INSTANTIATE_TEST_SUITE_P(
    QueueEx2_3, QueueSuite,
    ::testing::Values(QueueImpl{
        "student", &run_mpmc<BlockingAdapter<StudentBlockingQueue<std::uint64_t>>>, true, "",
        [] {
          StudentBlockingQueue<std::uint64_t> q(2);
          q.push(1);
          q.pop();
        }}),
    impl_name);

// --- the blocking queue's contract, reference and student ---------------------------------------

template <class Q>
class BlockingQueueTyped : public ::testing::Test {};
struct QueueNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, BoundedBlockingQueue<int>> ? "reference" : "student";
  }
};
using BlockingQueues = ::testing::Types<BoundedBlockingQueue<int>, StudentBlockingQueue<int>>;
TYPED_TEST_SUITE(BlockingQueueTyped, BlockingQueues, QueueNames);

TYPED_TEST(BlockingQueueTyped, SingleThreadFifoCapacityAndClose) {
  TypeParam q(3);
  CDL_TRY_EXERCISE(EXPECT_TRUE(q.try_push(1)));
  EXPECT_TRUE(q.push(2));
  EXPECT_TRUE(q.try_push(3));
  EXPECT_FALSE(q.try_push(4)) << "a full queue accepted an item";
  EXPECT_EQ(q.pop(), std::optional<int>(1));
  EXPECT_EQ(q.try_pop(), std::optional<int>(2));
  EXPECT_TRUE(q.push(5));
  q.close();
  EXPECT_FALSE(q.push(6)) << "a closed queue accepted an item";
  EXPECT_FALSE(q.try_push(7));
  EXPECT_EQ(q.pop(), std::optional<int>(3)) << "close() must not drop queued items";
  EXPECT_EQ(q.pop(), std::optional<int>(5));
  EXPECT_EQ(q.pop(), std::nullopt) << "closed and drained: the stream has ended";
  EXPECT_EQ(q.try_pop(), std::nullopt);
  q.close();  // idempotent
}

TYPED_TEST(BlockingQueueTyped, CloseWakesBlockedConsumersAndProducers) {
  {
    TypeParam probe(1);
    CDL_TRY_EXERCISE(probe.close());
  }
  within_seconds(kWatchdogSeconds, [] {
    TypeParam empty(4);
    std::atomic<int> ended{0};
    {
      std::vector<std::jthread> consumers;
      for (int c = 0; c < 3; ++c)
        consumers.emplace_back([&] { ended.fetch_add(!empty.pop().has_value()); });
      std::this_thread::sleep_for(20ms);  // let them block (the test is right either way)
      empty.close();
    }
    EXPECT_EQ(ended.load(), 3) << "every blocked consumer must return nullopt after close()";

    TypeParam full(1);
    EXPECT_TRUE(full.push(1));
    std::atomic<int> refused{0};
    {
      std::vector<std::jthread> producers;
      for (int p = 0; p < 2; ++p) producers.emplace_back([&] { refused.fetch_add(!full.push(2)); });
      std::this_thread::sleep_for(20ms);
      full.close();
    }
    EXPECT_EQ(refused.load(), 2) << "blocked producers must get false after close()";
    EXPECT_EQ(full.pop(), std::optional<int>(1));
  });
}

TYPED_TEST(BlockingQueueTyped, BlockedConsumerGetsTheNextItem) {
  within_seconds(kWatchdogSeconds, [] {
    TypeParam q(1);
    CDL_TRY_EXERCISE(EXPECT_TRUE(q.try_push(0)));
    EXPECT_EQ(q.pop(), std::optional<int>(0));
    std::optional<int> got;
    std::jthread consumer([&] { got = q.pop(); });
    std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(q.push(42));
    consumer.join();
    EXPECT_EQ(got, std::optional<int>(42));
  });
}

TEST(BlockingQueue, CarriesMoveOnlyItems) {
  BoundedBlockingQueue<std::unique_ptr<int>> q(2);
  EXPECT_TRUE(q.push(std::make_unique<int>(7)));
  auto v = q.pop();
  ASSERT_TRUE(v && *v);
  EXPECT_EQ(**v, 7);
  EXPECT_THROW(BoundedBlockingQueue<int>(0), std::invalid_argument);
}

// --- the ring's own contract -------------------------------------------------------------------

TEST(RingQueue, CapacityIsAPowerOfTwoAndExact) {
  EXPECT_THROW(MpmcRingQueue<int>(3), std::invalid_argument);
  EXPECT_THROW(MpmcRingQueue<int>(1), std::invalid_argument);
  MpmcRingQueue<int> q(4);
  for (int lap = 0; lap < 5; ++lap) {  // several laps: sequence numbers wrap around the ring
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(q.try_push(lap * 10 + i));
    EXPECT_FALSE(q.try_push(99)) << "lap " << lap;
    int v = -1;
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(q.try_pop(v));
      EXPECT_EQ(v, lap * 10 + i);
    }
    EXPECT_FALSE(q.try_pop(v));
  }
}

// --- stacks ------------------------------------------------------------------------------------

struct StackImpl {
  std::string name;
  StackResult (*run)(unsigned, std::uint64_t, unsigned, SeenTable*);
  StackResult (*stress)(unsigned, std::chrono::milliseconds);
  std::function<void()> probe;
};
void PrintTo(const StackImpl& s, std::ostream* os) { *os << s.name; }

std::vector<StackImpl> stack_rows() {
  std::vector<StackImpl> rows;
  for (const StackVariant& v : kStackVariants)
    rows.push_back({std::string(v.name), v.run, v.stress, nullptr});
  return rows;
}

class StackSuite : public ::testing::TestWithParam<StackImpl> {};

TEST_P(StackSuite, NothingLostOrDuplicated) {
  const StackImpl& impl = GetParam();
  if (impl.probe) CDL_TRY_EXERCISE(impl.probe());
  within_seconds(kWatchdogSeconds, [&impl] {
    constexpr unsigned kBurst = 8;
    const std::uint64_t rounds = kThreadSanitizer ? 300 : 3000;
    for (unsigned threads : {1u, 2u, 4u, 8u}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      SeenTable seen(threads * rounds * kBurst);
      const StackResult r = impl.run(threads, rounds, kBurst, &seen);
      EXPECT_FALSE(r.stuck) << "a push or pop could not succeed for seconds: nodes were lost";
      EXPECT_EQ(r.pushed, threads * rounds * kBurst);
      EXPECT_EQ(r.popped, r.pushed);
      EXPECT_EQ(r.popped_sum, r.pushed_sum);
      EXPECT_EQ(r.popped_xr, r.pushed_xr);
      std::uint64_t lost = 0, duplicated = 0;
      for (const auto& s : seen) {
        lost += s.load() == 0;
        duplicated += s.load() > 1;
      }
      EXPECT_EQ(lost, 0u);
      EXPECT_EQ(duplicated, 0u);
    }
  });
}

// ABA needs a thread preempted between reading head and its CAS while others pop and push the
// same node back: 8 threads churning 8 nodes, more threads than cores, for a second. A stack whose
// CAS does not bump the tag usually loses and duplicates items here (not certainly: the test
// can only make the interleaving likely).
TEST_P(StackSuite, SurvivesPreemptionChurn) {
  const StackImpl& impl = GetParam();
  if (impl.probe) CDL_TRY_EXERCISE(impl.probe());
  within_seconds(kWatchdogSeconds, [&impl] {
    const StackResult r = impl.stress(8, kThreadSanitizer ? 300ms : 1000ms);
    EXPECT_GT(r.pushed, 0u);
    EXPECT_TRUE(r.conserved()) << (r.stuck ? "stuck: a push or pop failed for seconds; " : "")
                               << r.pushed << " pushed, " << r.popped
                               << " popped (or different items): lost or duplicated";
  });
}

std::string stack_name(const ::testing::TestParamInfo<StackImpl>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Stacks, StackSuite, ::testing::ValuesIn(stack_rows()), stack_name);
INSTANTIATE_TEST_SUITE_P(StackEx2_5, StackSuite,
                         ::testing::Values(StackImpl{
                             "student", &run_stack<StudentTreiberStack<std::uint64_t>>,
                             &stress_stack<StudentTreiberStack<std::uint64_t>>,
                             [] {
                               // Single-threaded contract: LIFO, capacity, empty.
                               StudentTreiberStack<std::uint64_t> s(2);
                               if (!s.push(1) || !s.push(2) || s.push(3))
                                 throw std::runtime_error("push: capacity 2 not respected");
                               if (s.pop() != std::optional<std::uint64_t>(2) ||
                                   s.pop() != std::optional<std::uint64_t>(1) || s.pop())
                                 throw std::runtime_error("pop: not LIFO, or not empty after");
                               if (!s.push(4) || s.pop() != std::optional<std::uint64_t>(4))
                                 throw std::runtime_error("a node was not reused after pop");
                             }}),
                         stack_name);

TEST(TreiberStack, LifoCapacityAndNodeReuse) {
  TreiberStack<int> s(3);
  EXPECT_EQ(s.pop(), std::nullopt);
  for (int round = 0; round < 4; ++round) {  // nodes go back to the pool and come out again
    EXPECT_TRUE(s.push(1));
    EXPECT_TRUE(s.push(2));
    EXPECT_TRUE(s.push(3));
    EXPECT_FALSE(s.push(4)) << "the pool has 3 nodes";
    EXPECT_EQ(s.pop(), std::optional<int>(3));
    EXPECT_EQ(s.pop(), std::optional<int>(2));
    EXPECT_EQ(s.pop(), std::optional<int>(1));
    EXPECT_EQ(s.pop(), std::nullopt);
  }
}

TEST(TreiberStack, TaggedIndexPacking) {
  const std::uint64_t t = pack_tagged(7, 0xABCDu);
  EXPECT_EQ(tagged_index(t), 7u);
  EXPECT_EQ(tagged_tag(t), 0xABCDu);
  EXPECT_EQ(tagged_index(pack_tagged(kNil, 1)), kNil);
  // The tag wraps: 2^32 operations bring a head back to the same word (the scheme's limit).
  EXPECT_EQ(tagged_tag(pack_tagged(3, 0xFFFFFFFFu + 1u)), 0u);
}

// --- message passing vs shared memory ------------------------------------------------------------

class MessagePassing : public ::testing::TestWithParam<MessagePassingVariant> {};

TEST_P(MessagePassing, HistogramEqualsTheSerialOne) {
  within_seconds(kWatchdogSeconds, [] {
    const std::uint64_t per = kThreadSanitizer ? 2'000 : 20'000;
    for (unsigned producers : {1u, 2u, 4u, 8u}) {
      // 1001 is not a multiple of the batch: the last, partial batch must be sent too.
      for (std::uint64_t n : {per, std::uint64_t{1001}})
        EXPECT_EQ(GetParam().run(producers, n), serial_histogram(producers, n))
            << producers << " producers, " << n << " items each";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Variants, MessagePassing, ::testing::ValuesIn(kMessagePassingVariants),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
