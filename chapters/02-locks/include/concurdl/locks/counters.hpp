// One shared counter, incremented by every thread: the smallest piece of shared state there is
// (a step counter, a samples-seen count, a reference count). Four ways, simplest first:
//
//   v1_mutex      ++value under a std::mutex: correct, and a lock round trip per increment
//   v2_fetch_add  one atomic read-modify-write (lock xadd on x86): no lock, but every increment
//                 still needs the line in exclusive state, so the line ping-pongs between cores
//   v3_cas_loop   read, add, compare-exchange, retry if someone got there first: what fetch_add
//                 is when the hardware has no such instruction (or the update is not an add);
//                 under contention, failed CASes are wasted round trips
//   v4_sharded    one padded slot per thread, each incremented by its owner only (relaxed load +
//                 store, no read-modify-write); a reader sums the slots. No line is shared while
//                 counting; reading the total is O(threads) and only a snapshot while counting
//
// Run: concurdl run ch02/counter (contended, 1..N threads) and ch02/counter_uncontended (Google
// Benchmark: one increment, one thread). Memory order: increments are relaxed everywhere: the
// count publishes nothing else, and the join (or the final lock) orders the last read.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

class MutexCounter {
 public:
  explicit MutexCounter(unsigned /*threads*/) {}
  void add(unsigned /*thread*/) {
    std::lock_guard lock(mu_);
    ++value_;
  }
  std::uint64_t total() {
    std::lock_guard lock(mu_);
    return value_;
  }

 private:
  std::mutex mu_;
  std::uint64_t value_ = 0;
};

class FetchAddCounter {
 public:
  explicit FetchAddCounter(unsigned) {}
  void add(unsigned) { value_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t total() { return value_.load(std::memory_order_relaxed); }

 private:
  alignas(kCacheLine) std::atomic<std::uint64_t> value_{0};
};

class CasLoopCounter {
 public:
  explicit CasLoopCounter(unsigned) {}
  void add(unsigned) {
    std::uint64_t v = value_.load(std::memory_order_relaxed);
    // On failure, compare_exchange_weak loads the current value into v: retry from there.
    while (!value_.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) {
    }
  }
  std::uint64_t total() { return value_.load(std::memory_order_relaxed); }

 private:
  alignas(kCacheLine) std::atomic<std::uint64_t> value_{0};
};

class ShardedCounter {
 public:
  explicit ShardedCounter(unsigned threads) : slots_(threads) {}
  // Only thread `thread` writes slot `thread`: a load and a store, no read-modify-write. Atomic
  // (relaxed) only so that total() may read while others count.
  void add(unsigned thread) {
    std::atomic<std::uint64_t>& s = slots_[thread].value;
    s.store(s.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::uint64_t total() {
    std::uint64_t t = 0;
    for (const Slot& s : slots_) t += s.value.load(std::memory_order_relaxed);
    return t;
  }

 private:
  struct alignas(kCacheLine) Slot {
    std::atomic<std::uint64_t> value{0};
  };
  std::vector<Slot> slots_;
};

// `threads` threads, started together, each add()ing `per_thread` times; returns total().
template <class Counter>
std::uint64_t count_with(unsigned threads, std::uint64_t per_thread) {
  Counter counter(threads);
  detail::StartGate gate;
  {
    std::vector<std::jthread> team;
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        gate.arrive_and_wait();
        for (std::uint64_t i = 0; i < per_thread; ++i) counter.add(t);
      });
    gate.open_when(threads);
  }
  return counter.total();
}

// One thread, n increments of one counter (a static, so the atomics cannot be optimised away):
// the micro-benchmark's unit of work. Returns the counter's total so far.
template <class Counter>
std::uint64_t add_uncontended(std::uint64_t n) {
  static Counter counter(1);
  for (std::uint64_t i = 0; i < n; ++i) counter.add(0);
  return counter.total();
}

struct CounterVariant : VariantInfo {
  std::uint64_t (*count)(unsigned threads, std::uint64_t per_thread);
  std::uint64_t (*add_uncontended)(std::uint64_t n);
};

template <class C>
constexpr CounterVariant counter_row(std::string_view name, std::string_view what) {
  return {{name, what}, &count_with<C>, &add_uncontended<C>};
}

inline constexpr CounterVariant kCounterRows[] = {
    counter_row<MutexCounter>("v1_mutex", "++value under a std::mutex: a lock and an unlock each"),
    counter_row<FetchAddCounter>(
        "v2_fetch_add", "one atomic fetch_add (lock xadd): no lock, but the line ping-pongs"),
    counter_row<CasLoopCounter>(
        "v3_cas_loop", "load, add, compare_exchange, retry: contended CASes fail and retry"),
    counter_row<ShardedCounter>(
        "v4_sharded", "a padded slot per thread, summed on read: nothing shared while counting"),
};

inline constexpr VariantTable kCounterVariants{kCounterRows};

}  // namespace concurdl::locks
