// The lock table: every lock of spinlocks.hpp and std::mutex as one row each, with the drivers
// that the experiments (experiments_locks.cpp), the micro-benchmarks (bench/uncontended.cpp) and
// the tests (tests/test_locks.cpp) run over the table. A new lock is a class in spinlocks.hpp
// and one row here.
//
// The contention driver runs `threads` threads for a fixed wall-clock time, each acquiring the
// lock as fast as it can, doing a critical section of a given length on shared plain (non-atomic)
// data, and releasing. Fixed duration, not fixed work, because a pure spinlock with more threads
// than cores can be an order of magnitude or more slower than std::mutex, and how much depends on
// the scheduler: a fixed amount of work could take minutes there; a fixed duration stays bounded
// and simply counts fewer acquisitions.
//
//   do { lock(); ++counter; data = cs_work(data, steps); unlock(); ++mine; } while (!stop);
//
// What comes back: acquisitions per thread (throughput, and Jain's fairness index from their
// spread) and the protected counter, which must equal their sum: a lock that lets two threads in
// at once loses increments of a plain counter, so the check proves mutual exclusion.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/locks/spin.hpp"
#include "concurdl/locks/spinlocks.hpp"

namespace concurdl::locks {

// --- critical sections of a chosen length --------------------------------------------------------

// A dependent chain of xorshift-multiply steps: no memory traffic, nothing to vectorise, each step
// needs the one before. A critical section does `steps` of them on the protected data.
inline std::uint64_t cs_work(std::uint64_t x, std::uint32_t steps) {
  for (std::uint32_t i = 0; i < steps; ++i) {
    x ^= x >> 29;
    x *= 0x9E3779B97F4A7C15ull;
  }
  return x;
}

// Measured once per process: nanoseconds per cs_work step on this machine (best of three), so
// that "a 1 us critical section" means 1 us here and on a faster machine alike.
inline double ns_per_cs_step() {
  static const double ns = [] {
    constexpr std::uint32_t kSteps = 1u << 21;
    double best = 1e300;
    std::uint64_t sink = 1;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      sink = cs_work(sink, kSteps);
      const double elapsed =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
              .count();
      best = std::min(best, elapsed);
    }
    // sink must be used or the loop is dead code; it is odd with overwhelming probability.
    return best / kSteps + (sink == 0 ? 1e-9 : 0.0);
  }();
  return ns;
}

inline std::uint32_t cs_steps_for(double ns) {
  if (ns <= 0) return 0;
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(ns / ns_per_cs_step())));
}

// The critical sections the experiments sweep: name (the "cs" parameter) and length.
struct CriticalSection {
  std::string_view name;
  double ns;
};
inline constexpr CriticalSection kCriticalSections[] = {
    {"empty", 0},    // ++counter only: the lock's own cost dominates
    {"100ns", 100},  // a short update (a few cache misses' worth)
    {"1us", 1000},   // a longer one: waiting dominates, the lock's cost hides
};

// --- Jain's fairness index ---------------------------------------------------------------------

// J(x) = (sum x)^2 / (n * sum x^2): 1 when every thread got the same share, 1/n when one thread
// got everything. A run where nobody got anything counts as fair (1): nothing was unequal.
inline double jain_index(std::span<const std::uint64_t> x) {
  if (x.empty()) return 1.0;
  double sum = 0, sum_sq = 0;
  for (std::uint64_t v : x) {
    sum += static_cast<double>(v);
    sum_sq += static_cast<double>(v) * static_cast<double>(v);
  }
  if (sum_sq == 0) return 1.0;
  return sum * sum / (static_cast<double>(x.size()) * sum_sq);
}

// --- the drivers -------------------------------------------------------------------------------

struct ContentionResult {
  std::vector<std::uint64_t> per_thread;  // acquisitions by each thread
  std::uint64_t protected_count = 0;      // the plain counter incremented inside the lock
  double seconds = 0;                     // from the start signal until the last thread left
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (std::uint64_t v : per_thread) t += v;
    return t;
  }
};

namespace detail {

// What the lock protects: a plain counter and the critical section's data, on their own line
// (not next to the lock word, so the lock's traffic and the data's are separate).
struct alignas(kCacheLine) Protected {
  std::uint64_t counter = 0;
  std::uint64_t data = 1;
};

// All threads created, then released together, so that none gets a head start while the others
// are still being created. Waiters sleep (atomic wait, a futex) rather than spin: a thread that
// spun at the gate would start with its time slice used up and be preempted at once, which on a
// busy machine shows up as one thread doing nothing for a whole run.
struct StartGate {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  void arrive_and_wait() {
    ready.fetch_add(1, std::memory_order_relaxed);
    go.wait(false, std::memory_order_acquire);
  }
  void open_when(unsigned threads) {
    SpinWait w;
    while (ready.load(std::memory_order_relaxed) < threads) w.wait();
    go.store(true, std::memory_order_release);
    go.notify_all();
  }
};

}  // namespace detail

// `threads` threads acquire L for `duration`, each critical section doing `cs_steps` of cs_work.
template <class L>
ContentionResult contend(unsigned threads, std::uint32_t cs_steps,
                         std::chrono::nanoseconds duration) {
  struct alignas(kCacheLine) Shared {
    L lock;
  } shared;
  detail::Protected prot;
  alignas(kCacheLine) std::atomic<bool> stop{false};
  detail::StartGate gate;
  ContentionResult r;
  r.per_thread.assign(threads, 0);
  std::chrono::steady_clock::time_point start;
  {
    std::vector<std::jthread> team;
    team.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        gate.arrive_and_wait();
        std::uint64_t mine = 0;
        // At least one acquisition per thread, even one that first runs after the deadline (a
        // busy machine): a thread that never ran says nothing about the lock.
        // relaxed: stop is a hint to finish; the joins below publish everything.
        do {
          shared.lock.lock();
          ++prot.counter;
          prot.data = cs_work(prot.data, cs_steps);
          shared.lock.unlock();
          ++mine;
        } while (!stop.load(std::memory_order_relaxed));
        r.per_thread[t] = mine;  // once, at the end: no false sharing while counting
      });
    gate.open_when(threads);
    start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(duration);
    stop.store(true, std::memory_order_relaxed);
  }  // jthreads join here
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.protected_count = prot.counter;
  return r;
}

// The tests' mutual-exclusion check: `threads` threads each do `iterations` increments of a plain
// counter under L, all started together; returns the counter, which must be threads x iterations.
// With use_try_lock, every other acquisition spins on try_lock() instead of calling lock().
template <class L>
std::uint64_t count_under_lock(unsigned threads, std::uint64_t iterations, bool use_try_lock) {
  L lock;
  detail::Protected prot;
  detail::StartGate gate;
  {
    std::vector<std::jthread> team;
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([&] {
        gate.arrive_and_wait();
        for (std::uint64_t i = 0; i < iterations; ++i) {
          if (use_try_lock && (i & 1)) {
            SpinWait w;
            while (!lock.try_lock()) w.wait();
          } else {
            lock.lock();
          }
          ++prot.counter;
          lock.unlock();
        }
      });
    gate.open_when(threads);
  }
  return prot.counter;
}

// The micro-benchmark's unit of work: n uncontended lock/unlock pairs on one lock (a static, so
// the compiler cannot prove it private and drop the atomics). Returns the protected counter.
template <class L>
std::uint64_t lock_unlock_pairs(std::uint64_t n) {
  static L lock;
  static std::uint64_t counter = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    lock.lock();
    ++counter;
    lock.unlock();
  }
  lock.lock();
  const std::uint64_t c = counter;
  lock.unlock();
  return c;
}

// The single-threaded contract, run on the calling thread (so an exercise stub's NotImplemented
// reaches the test): a held lock refuses try_lock, a free one grants it. "" when right.
template <class L>
const char* lock_contract_violation() {
  L lock;
  lock.lock();
  if (lock.try_lock()) return "try_lock() succeeded on a lock that was held";
  lock.unlock();
  if (!lock.try_lock()) return "try_lock() failed on a free lock";
  lock.unlock();
  {
    std::lock_guard guard(lock);  // Lockable: works with the standard guards
  }
  if (!lock.try_lock()) return "try_lock() failed after a lock_guard released the lock";
  lock.unlock();
  return "";
}

// --- the table ---------------------------------------------------------------------------------

struct LockVariant : VariantInfo {
  bool pure_spin;  // never sleeps or yields: collapses with more threads than cores
  bool fifo;       // hands the lock over in arrival order (no starvation)
  ContentionResult (*contend)(unsigned threads, std::uint32_t cs_steps,
                              std::chrono::nanoseconds duration);
  std::uint64_t (*count)(unsigned threads, std::uint64_t iterations, bool use_try_lock);
  std::uint64_t (*pairs)(std::uint64_t n);
  const char* (*contract_violation)();
};

template <Lockable L>
constexpr LockVariant lock_row(std::string_view name, std::string_view what, bool pure_spin,
                               bool fifo) {
  return {{name, what},
          pure_spin,
          fifo,
          &contend<L>,
          &count_under_lock<L>,
          &lock_unlock_pairs<L>,
          &lock_contract_violation<L>};
}

// Simplest first; std::mutex, the baseline, first of all.
inline constexpr LockVariant kLockRows[] = {
    lock_row<StdMutex>("std_mutex",
                       "the baseline: a futex; one atomic try, then sleeps in the kernel and is "
                       "woken by the unlock. Never collapses when oversubscribed",
                       false, false),
    lock_row<TasLock>("v1_tas",
                      "test-and-set: every waiter writes the lock's line in a loop; the line "
                      "ping-pongs between cores even while the lock is held",
                      true, false),
    lock_row<TtasLock>("v2_ttas",
                       "test-and-test-and-set: waiters read until the lock looks free, then one "
                       "exchange each: quiet while held, a burst at every release",
                       true, false),
    lock_row<TtasBackoffLock>("v3_ttas_backoff",
                              "v2 + randomised exponential backoff after a lost exchange: fewer "
                              "threads storm the line at each release (exercise 2.1)",
                              true, false),
    lock_row<TicketLock>("v4_ticket",
                         "take a number, wait until served: FIFO, fair, but every waiter polls "
                         "one line and a descheduled next-in-line stalls everyone (exercise 2.2)",
                         true, true),
    lock_row<McsLock>("v5_mcs",
                      "a queue of per-thread nodes, each waiter spinning on its own line: one "
                      "line moves per hand-over; FIFO, with the ticket lock's oversubscription "
                      "problem",
                      true, true),
};

inline constexpr VariantTable kLockVariants{kLockRows};

}  // namespace concurdl::locks
