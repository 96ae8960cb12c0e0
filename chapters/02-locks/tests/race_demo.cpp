// A deliberate data race, for the lesson: four threads increment one plain counter without a
// lock. `++counter` is a load, an add and a store; two threads that load the same value both
// store value + 1, and one increment is lost. The counter is `volatile` only so that the compiler
// really does a load and a store per iteration (otherwise it would add n at once in a register and
// the demonstration would depend on the optimiser); volatile makes nothing atomic.
// This binary is labelled race-demo: the tsan test preset leaves it out, because ThreadSanitizer
// reports the race (which is the point). Run it under TSan by hand to see the report:
//   build-tsan/bin/ch02_race_demos
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr unsigned kThreads = 4;
// Enough that each thread runs for milliseconds, longer than it takes the others to start.
constexpr std::uint64_t kEach = 5'000'000;

TEST(RaceDemo, UnprotectedCounterLosesIncrements) {
  volatile std::uint64_t counter = 0;
  std::latch start(kThreads);  // all threads begin together, so that their loops overlap
  {
    std::vector<std::jthread> team;
    for (unsigned t = 0; t < kThreads; ++t)
      team.emplace_back([&counter, &start] {
        start.arrive_and_wait();
        for (std::uint64_t i = 0; i < kEach; ++i) counter = counter + 1;  // the race
      });
  }
  const std::uint64_t want = kThreads * kEach, got = counter;
  std::printf("unprotected counter: %llu of %llu increments arrived (%llu lost)\n",
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(want),
              static_cast<unsigned long long>(want - got));
  EXPECT_LE(got, want);
  // Losing increments is likely on a multi-core machine, never guaranteed (one core, or threads
  // that happen not to overlap): the test demonstrates, it does not insist.
  if (got == want) GTEST_SKIP() << "no increment was lost this time: the race did not show";
}

TEST(RaceDemo, TheSameCounterUnderAMutexIsExact) {
  std::uint64_t counter = 0;
  std::mutex mu;
  {
    std::vector<std::jthread> team;
    for (unsigned t = 0; t < kThreads; ++t)
      team.emplace_back([&] {
        for (std::uint64_t i = 0; i < kEach / 10; ++i) {
          std::lock_guard lock(mu);
          ++counter;
        }
      });
  }
  EXPECT_EQ(counter, kThreads * (kEach / 10));
}

}  // namespace
