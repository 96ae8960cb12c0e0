// The reduction ladder's tests: every row of kSumVariants, and the student sums of exercises 1.1
// and 1.2, through the same checks at 1, 2, 4 and 8 threads (more threads than cores, and more
// threads than elements). Memory-bound sums of small integers are exact in double whatever the
// order of the additions, so they must equal the serial reference exactly; compute-bound sums
// must lie within the rounding bound sum_tolerance of reduction.hpp. The rows that can pin
// their threads (v1 to v3, for ch01/false_sharing_placement) are tested pinned as well.
//   ch01_tests --gtest_filter='Reduction*'
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "../exercises/student_sum.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/threads/reduction.hpp"

namespace {

using concurdl::threads::SumFn;
using concurdl::threads::SumKind;
namespace ct = concurdl::threads;

struct SumImpl {
  std::string name;
  SumFn fn;
  std::string_view runtime = "std::thread";
};

// gtest prints a parameter in test listings (and CTest keeps that in the test's name): the name,
// not the struct's bytes.
void PrintTo(const SumImpl& impl, std::ostream* os) { *os << impl.name; }

std::vector<SumImpl> ladder() {
  std::vector<SumImpl> impls;
  for (const auto& v : ct::kSumVariants) impls.push_back({std::string(v.name), v.fn, v.runtime});
  return impls;
}

// oneTBB hands tasks between threads inside libtbb, which is not built with ThreadSanitizer, so
// TSan cannot see that synchronisation and reports races inside TBB's own headers (partitioner,
// parallel_reduce) for any parallel_reduce. The TBB variants are tested in the other builds.
using concurdl::testing::kThreadSanitizer;

constexpr unsigned kThreads[] = {1, 2, 4, 8};
// Empty, single, fewer elements than threads, around the thread counts and a vector width,
// and large enough that every thread has a long chunk.
constexpr std::size_t kSizes[] = {0, 1, 2, 3, 7, 8, 9, 17, 1000, 65537};

// Integers 0..15: every partial sum of up to 2^49 of them is an integer below 2^53, exact in
// double, so any order of additions gives exactly the serial result.
std::vector<float> small_integers(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7 + 3) % 16);
  return x;
}

// Values in [0, 1), where the compute-bound polynomial is between 1 and 25.
std::vector<float> unit_values(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  return x;
}

void expect_within_bound(SumFn fn, std::span<const float> x, unsigned threads) {
  const double want = ct::serial_reference(x, SumKind::compute_bound);
  const double got = fn(x, threads, SumKind::compute_bound);
  EXPECT_NEAR(got, want, ct::sum_tolerance(x.size(), want))
      << "compute-bound, threads=" << threads << " n=" << x.size();
}

class ReductionSum : public ::testing::TestWithParam<SumImpl> {
 protected:
  void SetUp() override {
    if (kThreadSanitizer && GetParam().runtime == "oneTBB")
      GTEST_SKIP() << "oneTBB synchronises inside uninstrumented libtbb: ThreadSanitizer would "
                      "report false races; this variant is tested in the default build";
  }
};

TEST_P(ReductionSum, MemoryBoundEqualsSerialExactly) {
  const SumFn fn = GetParam().fn;
  CDL_TRY_EXERCISE(for (std::size_t n
                        : kSizes) {
    const std::vector<float> x = small_integers(n);
    const double want = ct::serial_reference(x, SumKind::memory_bound);
    for (unsigned threads : kThreads)
      EXPECT_EQ(fn(x, threads, SumKind::memory_bound), want) << "threads=" << threads << " n=" << n;
  });
}

// A span that starts one float past an allocation's start, so that vectorised chunks begin
// unaligned and chunk boundaries fall mid-vector.
TEST_P(ReductionSum, UnalignedSubspanEqualsSerialExactly) {
  const SumFn fn = GetParam().fn;
  CDL_TRY_EXERCISE({
    const std::vector<float> data = small_integers(4099);
    const std::span<const float> x = std::span<const float>(data).subspan(1, 4093);
    const double want = ct::serial_reference(x, SumKind::memory_bound);
    for (unsigned threads : kThreads)
      EXPECT_EQ(fn(x, threads, SumKind::memory_bound), want) << "threads=" << threads;
  });
}

TEST_P(ReductionSum, ComputeBoundWithinRoundingBound) {
  const SumFn fn = GetParam().fn;
  CDL_TRY_EXERCISE(for (std::size_t n
                        : kSizes) {
    const std::vector<float> x = unit_values(n);
    for (unsigned threads : kThreads) expect_within_bound(fn, x, threads);
  });
}

// Non-integer data in the memory-bound sum: rounding differs by order, within the bound.
TEST_P(ReductionSum, MemoryBoundFractionsWithinRoundingBound) {
  const SumFn fn = GetParam().fn;
  CDL_TRY_EXERCISE({
    const std::vector<float> x = unit_values(100003);
    const double want = ct::serial_reference(x, SumKind::memory_bound);
    for (unsigned threads : kThreads)
      EXPECT_NEAR(fn(x, threads, SumKind::memory_bound), want, ct::sum_tolerance(x.size(), want))
          << "threads=" << threads;
  });
}

// Two callers at once, with different thread counts: nothing may be shared between calls (the
// pool variant shares a pool, the TBB variants a process-wide thread limit).
TEST_P(ReductionSum, ConcurrentCallersEachGetTheirSum) {
  const SumFn fn = GetParam().fn;
  const std::vector<float> a = small_integers(20000), b = small_integers(30001);
  const double want_a = ct::serial_reference(a, SumKind::memory_bound);
  const double want_b = ct::serial_reference(b, SumKind::memory_bound);
  // First call on this thread: an untouched stub throws here, not inside a helper thread.
  CDL_TRY_EXERCISE(EXPECT_EQ(fn(a, 2, SumKind::memory_bound), want_a));
  double got_a[4] = {}, got_b[4] = {};
  {
    std::jthread first([&] {
      for (unsigned k = 0; k < 4; ++k) got_a[k] = fn(a, 2, SumKind::memory_bound);
    });
    std::jthread second([&] {
      for (unsigned k = 0; k < 4; ++k) got_b[k] = fn(b, 4, SumKind::memory_bound);
    });
  }
  for (unsigned k = 0; k < 4; ++k) {
    EXPECT_EQ(got_a[k], want_a) << "call " << k;
    EXPECT_EQ(got_b[k], want_b) << "call " << k;
  }
}

std::string impl_name(const ::testing::TestParamInfo<SumImpl>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(ReductionLadder, ReductionSum, ::testing::ValuesIn(ladder()), impl_name);
INSTANTIATE_TEST_SUITE_P(ReductionEx1_1, ReductionSum,
                         ::testing::Values(SumImpl{"student", &ct::student_thread_sum}), impl_name);
INSTANTIATE_TEST_SUITE_P(ReductionEx1_2, ReductionSum,
                         ::testing::Values(SumImpl{"student", &ct::student_padded_sum}), impl_name);

TEST(ReductionChunks, CoverEveryIndexExactlyOnceInOrder) {
  for (std::size_t n : kSizes) {
    for (unsigned parts : {1u, 2u, 3u, 4u, 8u, 16u}) {
      std::size_t next = 0;
      for (unsigned t = 0; t < parts; ++t) {
        const auto [begin, end] = ct::chunk_bounds(n, parts, t);
        EXPECT_EQ(begin, next) << "n=" << n << " parts=" << parts << " t=" << t;
        EXPECT_LE(begin, end);
        EXPECT_LE(end - begin, n / parts + 1) << "chunks balanced to within one element";
        next = end;
      }
      EXPECT_EQ(next, n) << "n=" << n << " parts=" << parts;
    }
  }
}

TEST(ReductionTable, RowsAreNamedDescribedAndDistinct) {
  std::set<std::string_view> names;
  for (const auto& v : ct::kSumVariants) {
    EXPECT_TRUE(names.insert(v.name).second) << "duplicate variant " << v.name;
    EXPECT_EQ(v.name.substr(0, 1), "v") << v.name;
    EXPECT_FALSE(v.what.empty()) << v.name;
    EXPECT_NE(v.fn, nullptr) << v.name;
    EXPECT_EQ(ct::kSumVariants.lookup(v.name), &v);
  }
  EXPECT_EQ(ct::kSumVariants.lookup("no_such_variant"), nullptr);
  EXPECT_EQ(ct::kSumVariants.front().name, "v0_serial") << "the baseline comes first";
}

TEST(ReductionTable, RowsThatWritePerElementCanPinTheirThreads) {
  for (const auto& v : ct::kSumVariants)
    EXPECT_EQ(v.pinned != nullptr, v.writes == ct::Writes::per_element) << v.name;
}

// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// ch01/false_sharing_placement's form of v1 to v3: pinned to one CPU, or to the first and last
// allowed (the same one where there is one), at 1, 2, 4 and 8 threads, the sums stay exact.
TEST(ReductionPinned, PinnedRowsEqualSerialExactly) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  const std::vector<std::vector<int>> placements = {
      {}, {allowed.front()}, {allowed.front(), allowed.back()}};
  for (const auto& v : ct::kSumVariants) {
    if (v.pinned == nullptr) continue;
    for (std::size_t n : {std::size_t{0}, std::size_t{3}, std::size_t{65537}}) {
      const std::vector<float> x = small_integers(n);
      const double want = ct::serial_reference(x, SumKind::memory_bound);
      for (const std::vector<int>& cpus : placements)
        for (unsigned threads : kThreads)
          EXPECT_EQ(v.pinned(x, threads, SumKind::memory_bound, cpus), want)
              << v.name << " threads=" << threads << " n=" << n << " cpus=" << cpus.size();
    }
  }
}

// Thread t runs on cpus[t % size], from its first instruction of work on.
TEST(ReductionPinned, EveryThreadRunsOnTheCpuItWasGiven) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  const std::vector<int> cpus = {allowed.back(), allowed.front()};
  for (unsigned threads : kThreads) {
    std::vector<int> ran_on(threads, -1);
    ct::fork_join(
        threads, [&](unsigned t) { ran_on[t] = sched_getcpu(); }, cpus);
    for (unsigned t = 0; t < threads; ++t)
      EXPECT_EQ(ran_on[t], cpus[t % cpus.size()]) << "thread " << t << " of " << threads;
  }
}

// A CPU this process may not use is an error after the join, not a sum with a chunk missing.
TEST(ReductionPinned, ACpuOutsideTheMaskThrows) {
  const std::vector<int> allowed = allowed_cpus();
  const int outside = CPU_SETSIZE - 1;
  if (std::count(allowed.begin(), allowed.end(), outside)) GTEST_SKIP() << "every CPU is allowed";
  std::atomic<int> ran{0};
  const std::vector<int> cpus = {outside};
  EXPECT_THROW(ct::fork_join(
                   2, [&](unsigned) { ++ran; }, cpus),
               std::system_error);
  EXPECT_EQ(ran.load(), 0) << "a thread that could not be pinned does not run its body";
  const std::vector<float> x = small_integers(1000);
  EXPECT_THROW(
      ct::kSumVariants.find("v3_padded_partials").pinned(x, 2, SumKind::memory_bound, cpus),
      std::system_error);
}

// The padding that v3 relies on: one slot per cache line, while v2's slots are packed.
TEST(ReductionTable, PaddedSlotsFillACacheLine) {
  EXPECT_EQ(sizeof(ct::Slot<ct::kCacheLine>), ct::kCacheLine);
  EXPECT_EQ(alignof(ct::Slot<ct::kCacheLine>), ct::kCacheLine);
  EXPECT_EQ(sizeof(ct::Slot<alignof(double)>), sizeof(double));
}

}  // namespace
