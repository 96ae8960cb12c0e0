// The small tools every waiting loop in this chapter uses: how to spin politely (pause), how to
// back off when spinning does not pay (exponential, randomised), and when to give the core away
// (yield). The spinlocks use cpu_relax() only: a pure spinlock never yields, which is exactly why
// it collapses when there are more threads than cores (ch02/lock_throughput shows it). The
// queues' full/empty waits (SpinWait) spin a little and then yield, because a producer waiting
// for a descheduled consumer would otherwise burn its whole time slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>

#include "concurdl/core/hardware.hpp"

namespace concurdl::locks {

// The cache line to pad to, and cpu_relax(): the core's "I am spinning" (PAUSE on x86, which lets
// the sibling hyperthread run and avoids the pipeline flush when the awaited line changes).
using concurdl::cpu_relax;
using concurdl::kCacheLine;

// A tiny per-thread generator (xorshift64*): random backoff must not go through a shared
// generator, or the backoff itself would contend.
inline std::uint64_t thread_random() {
  thread_local std::uint64_t state =
      0x9E3779B97F4A7C15ull ^ std::hash<std::thread::id>{}(std::this_thread::get_id());
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

// Exponential backoff with jitter: after each failed attempt, pause for a random number of
// iterations in [limit/2, limit), then double the limit up to `max`. Doubling spreads the
// contenders out in time (fewer of them hit the lock's cache line at once); the jitter stops two
// threads that failed together from retrying together (lockstep, see hazards.hpp's livelock).
class Backoff {
 public:
  explicit Backoff(std::uint32_t min = 4, std::uint32_t max = 1024) : limit_(min), max_(max) {}
  void pause() {
    const std::uint32_t half = limit_ / 2;
    const std::uint32_t spins = half + static_cast<std::uint32_t>(thread_random() % (half + 1));
    for (std::uint32_t i = 0; i < spins; ++i) cpu_relax();
    if (limit_ < max_) limit_ *= 2;
  }
  std::uint32_t limit() const { return limit_; }

 private:
  std::uint32_t limit_, max_;
};

// Waiting for a queue to become non-full or non-empty (not a lock): spin with pause for a while,
// then yield on every further check so that a descheduled partner gets the core. Used by the
// non-blocking queues' adapters (queue_variants.hpp) and the tests' start barriers.
class SpinWait {
 public:
  void wait() {
    if (spins_ < kSpinLimit) {
      ++spins_;
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() { spins_ = 0; }

 private:
  static constexpr std::uint32_t kSpinLimit = 128;
  std::uint32_t spins_ = 0;
};

}  // namespace concurdl::locks
