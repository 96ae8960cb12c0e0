// Readers-writer locks (rw_lock.hpp) and the semaphore resource pool (semaphore_pool.hpp).
// RW: writers are exclusive (no reader ever sees a half-written table, no write is lost), readers
// really run side by side (where the lock is a RW lock), and our lock prefers writers. Pool: never
// more than `capacity` leases at once, no resource leased twice, try_acquire_for times out.
//   ch02_tests --gtest_filter='Rw*:ResourcePool*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <ostream>
#include <shared_mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/locks/queue_variants.hpp"  // kThreadSanitizer
#include "concurdl/locks/rw_lock.hpp"
#include "concurdl/locks/semaphore_pool.hpp"

// gtest finds PrintTo by argument-dependent lookup: in the row type's namespace. It names the
// row in test listings (and so in CTest) instead of dumping its bytes.
namespace concurdl::locks {
void PrintTo(const RwVariant& v, std::ostream* os) { *os << v.name; }
}  // namespace concurdl::locks

namespace {

using namespace concurdl::locks;
using concurdl::testing::within_seconds;
using namespace std::chrono_literals;

constexpr int kWatchdogSeconds = 90;

class RwSuite : public ::testing::TestWithParam<RwVariant> {};

// Fixed-duration mixed reads and writes at 1, 2, 4, 8 threads and three read ratios.
TEST_P(RwSuite, WritersAreExclusiveAndNoWriteIsLost) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : {1u, 2u, 4u, 8u})
      for (unsigned per_mille : {500u, 900u, 990u}) {
        const RwResult r = GetParam().contend(threads, per_mille, 16, 15ms);
        SCOPED_TRACE(::testing::Message()
                     << threads << " threads, " << per_mille / 10 << "% reads");
        EXPECT_GT(r.reads + r.writes, 0u);
        EXPECT_EQ(r.torn_reads, 0u) << "a reader saw a half-written table";
        EXPECT_TRUE(r.cells_equal);
        EXPECT_EQ(r.final_value, r.writes) << "writes were lost";
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Rw, RwSuite, ::testing::ValuesIn(kRwVariants),
                         [](const auto& info) { return std::string(info.param.name); });

// --- the RW locks as types: sharing and preference ---------------------------------------------

template <class RW>
class RwTyped : public ::testing::Test {};
struct RwNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, std::shared_mutex> ? "std_shared_mutex" : "writer_preferring";
  }
};
using RwLocks = ::testing::Types<std::shared_mutex, WriterPreferringRwLock>;
TYPED_TEST_SUITE(RwTyped, RwLocks, RwNames);

// Three readers each hold the lock until all three are inside at once: impossible unless
// readers share it. (A deadline turns "they never met" into a failure, not a hang.)
TYPED_TEST(RwTyped, ReadersHoldTheLockTogether) {
  within_seconds(kWatchdogSeconds, [] {
    TypeParam lock;
    constexpr int kReaders = 3;
    std::atomic<int> inside{0}, met{0};
    {
      std::vector<std::jthread> readers;
      for (int r = 0; r < kReaders; ++r)
        readers.emplace_back([&] {
          std::shared_lock guard(lock);
          inside.fetch_add(1);
          const auto deadline = std::chrono::steady_clock::now() + 10s;
          while (inside.load() < kReaders && std::chrono::steady_clock::now() < deadline)
            std::this_thread::yield();
          met.fetch_add(inside.load() == kReaders);
        });
    }
    EXPECT_EQ(met.load(), kReaders);
  });
}

TYPED_TEST(RwTyped, AWriterExcludesEveryone) {
  TypeParam lock;
  lock.lock();
  std::jthread other([&] {
    EXPECT_FALSE(lock.try_lock_shared());
    EXPECT_FALSE(lock.try_lock());
  });
  other.join();
  lock.unlock();
  lock.lock_shared();
  std::jthread reader([&] {
    EXPECT_TRUE(lock.try_lock_shared());
    lock.unlock_shared();
    EXPECT_FALSE(lock.try_lock()) << "a writer got in while a reader held the lock";
  });
  reader.join();
  lock.unlock_shared();
}

// Ours: a writer waiting behind a reader stops new readers from entering.
TEST(RwWriterPreference, AWaitingWriterHoldsNewReadersBack) {
  within_seconds(kWatchdogSeconds, [] {
    WriterPreferringRwLock lock;
    lock.lock_shared();  // a reader is inside
    std::atomic<bool> writer_done{false};
    std::jthread writer([&] {
      lock.lock();  // waits for the reader
      writer_done.store(true);
      lock.unlock();
    });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (lock.waiting_writers() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(lock.waiting_writers(), 1u);
    EXPECT_FALSE(lock.try_lock_shared()) << "a new reader overtook the waiting writer";
    EXPECT_FALSE(writer_done.load());
    lock.unlock_shared();  // the last reader out lets the writer in
    writer.join();
    EXPECT_TRUE(writer_done.load());
    EXPECT_TRUE(lock.try_lock_shared());
    lock.unlock_shared();
    EXPECT_EQ(lock.readers(), 0u);
  });
}

// --- the semaphore pool ------------------------------------------------------------------------

struct Buffer {
  std::atomic<int> holders{0};
  int id = 0;
  explicit Buffer(int i) : id(i) {}
  Buffer(Buffer&& o) noexcept : id(o.id) {}
};

std::vector<Buffer> buffers(int n) {
  std::vector<Buffer> v;
  for (int i = 0; i < n; ++i) v.emplace_back(i);
  return v;
}

TEST(ResourcePool, NeverMoreLeasesThanResources) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : {1u, 2u, 4u, 8u}) {
      constexpr int kCapacity = 3;
      const int rounds = kThreadSanitizer ? 200 : 2000;
      ResourcePool<Buffer> pool(buffers(kCapacity));
      std::atomic<int> in_use{0}, peak{0}, double_leased{0};
      std::atomic<std::int64_t> leases{0};
      {
        std::vector<std::jthread> team;
        for (unsigned t = 0; t < threads; ++t)
          team.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
              auto lease = pool.acquire();
              const int now = in_use.fetch_add(1) + 1;
              int p = peak.load();
              while (now > p && !peak.compare_exchange_weak(p, now)) {
              }
              double_leased.fetch_add(lease->holders.fetch_add(1) != 0);
              std::this_thread::yield();  // hold it a moment, so others pile up
              lease->holders.fetch_sub(1);
              in_use.fetch_sub(1);
              leases.fetch_add(1);
            }
          });
      }
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      EXPECT_LE(peak.load(), kCapacity);
      EXPECT_GE(peak.load(), 1);
      EXPECT_EQ(double_leased.load(), 0) << "a resource was leased to two threads at once";
      EXPECT_EQ(leases.load(), static_cast<std::int64_t>(threads) * rounds);
    }
  });
}

TEST(ResourcePool, TryAcquireTimesOutWhenExhausted) {
  within_seconds(kWatchdogSeconds, [] {
    ResourcePool<Buffer> pool(buffers(2));
    auto a = pool.acquire();
    auto b = pool.acquire();
    EXPECT_NE(a->id, b->id);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(pool.try_acquire_for(20ms).has_value());
    EXPECT_GE(std::chrono::steady_clock::now() - start, 15ms);
    {
      auto moved = std::move(a);  // a lease moves; only the last owner gives it back
    }
    auto c = pool.try_acquire_for(1s);
    ASSERT_TRUE(c.has_value());
    EXPECT_NE((*c)->id, b->id);
  });
}

TEST(ResourcePool, RejectsAnEmptyPool) {
  EXPECT_THROW(ResourcePool<int>(std::vector<int>{}), std::invalid_argument);
}

}  // namespace
