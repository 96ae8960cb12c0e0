// Queues and stacks as rows of two tables, with the drivers that check and time them
// (experiments_queues.cpp, tests/test_queues.cpp). Run: concurdl run ch02/queue_throughput
// ch02/stack_throughput.
//
//   queues (MPMC, FIFO per producer)          stacks (LIFO)
//   v1_blocking_queue  mutex + 2 condvars     locked_stack   std::vector under a std::mutex
//   v2_ring_queue      Vyukov, lock-free      treiber_stack  tagged indices + node pool
//   moodycamel         moodycamel::ConcurrentQueue (a peer: per-producer blocks, unbounded)
//   tbb_bounded        tbb::concurrent_bounded_queue (a peer: blocking, bounded)
//
// The MPMC driver: P producers each push n tagged items producer<<32 | seq, C consumers pop until
// the stream ends. Nothing may be lost or duplicated (count, sum and xor of the items popped
// equal those pushed; the tests also count every item exactly), and a FIFO queue must deliver
// each producer's items to any one consumer in increasing seq.
#pragma once

#include <concurrentqueue/concurrentqueue.h>
#include <oneapi/tbb/concurrent_queue.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "concurdl/core/sanitizers.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/locks/blocking_queue.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "concurdl/locks/ring_queue.hpp"
#include "concurdl/locks/spin.hpp"
#include "concurdl/locks/treiber_stack.hpp"

namespace concurdl::locks {

// Two peers cannot be checked by ThreadSanitizer, so their rows say why and the tests skip them
// under TSan (they are tested in the other builds), as chapter 01 does for oneTBB:
//   - oneTBB synchronises inside libtbb, which is not built with TSan: TSan cannot see that
//     synchronisation and reports races that are not there;
//   - moodycamel::ConcurrentQueue publishes its slots with std::atomic_thread_fence, which TSan
//     does not model: it reports the fenced plain accesses as races.
using ::concurdl::kThreadSanitizer;  // sanitizers.hpp

inline constexpr std::uint64_t tagged_item(std::uint32_t producer, std::uint32_t seq) {
  return (static_cast<std::uint64_t>(producer) << 32) | seq;
}

// --- adapters: one shape for every queue -------------------------------------------------------
// make_producer() / make_consumer() give a per-thread handle (moodycamel uses tokens; the others
// just point at the queue). push() waits while full; pop() waits for an item and returns false
// once the queue is closed and drained; close() is called after every producer has finished.

// Our blocking queue, and the student's (exercise 2.3): blocking push/pop and close().
template <class Q>
class BlockingAdapter {
 public:
  BlockingAdapter(std::size_t capacity, unsigned /*consumers*/) : q_(capacity) {}
  struct Handle {
    Q& q;
    void push(std::uint64_t v) { q.push(v); }
    bool pop(std::uint64_t& v) {
      std::optional<std::uint64_t> got = q.pop();
      if (!got) return false;
      v = *got;
      return true;
    }
  };
  Handle make_producer() { return {q_}; }
  Handle make_consumer() { return {q_}; }
  void close() { q_.close(); }

 private:
  Q q_;
};

// Non-blocking queues: spin (then yield) while full or empty; a closed flag ends the stream.
// After seeing `closed`, pop tries once more: every push finished before close(), so an item
// can only be missed if it was there before the flag, and the second try sees it.
class RingAdapter {
 public:
  RingAdapter(std::size_t capacity, unsigned) : q_(capacity) {}
  struct Handle {
    RingAdapter& a;
    void push(std::uint64_t v) {
      SpinWait w;
      while (!a.q_.try_push(v)) w.wait();
    }
    bool pop(std::uint64_t& v) {
      SpinWait w;
      while (!a.q_.try_pop(v)) {
        if (a.closed_.load(std::memory_order_acquire)) return a.q_.try_pop(v);
        w.wait();
      }
      return true;
    }
  };
  Handle make_producer() { return {*this}; }
  Handle make_consumer() { return {*this}; }
  void close() { closed_.store(true, std::memory_order_release); }

 private:
  MpmcRingQueue<std::uint64_t> q_;
  alignas(kCacheLine) std::atomic<bool> closed_{false};
};

// moodycamel::ConcurrentQueue with explicit tokens (its fast path): each producer fills blocks
// of its own, consumers visit producers' blocks in turn. Unbounded: `capacity` is only its
// initial size, so producers never wait; FIFO per producer.
class MoodycamelAdapter {
 public:
  MoodycamelAdapter(std::size_t capacity, unsigned) : q_(capacity) {}
  struct Producer {
    MoodycamelAdapter& a;
    moodycamel::ProducerToken token;
    void push(std::uint64_t v) {
      SpinWait w;
      while (!a.q_.enqueue(token, v)) w.wait();  // fails only if memory runs out
    }
  };
  struct Consumer {
    MoodycamelAdapter& a;
    moodycamel::ConsumerToken token;
    bool pop(std::uint64_t& v) {
      SpinWait w;
      while (!a.q_.try_dequeue(token, v)) {
        if (a.closed_.load(std::memory_order_acquire)) return a.q_.try_dequeue(token, v);
        w.wait();
      }
      return true;
    }
  };
  Producer make_producer() { return {*this, moodycamel::ProducerToken(q_)}; }
  Consumer make_consumer() { return {*this, moodycamel::ConsumerToken(q_)}; }
  void close() { closed_.store(true, std::memory_order_release); }

 private:
  moodycamel::ConcurrentQueue<std::uint64_t> q_;
  alignas(kCacheLine) std::atomic<bool> closed_{false};
};

// tbb::concurrent_bounded_queue: blocking push/pop (TBB spins, then sleeps on its own monitor).
// It has no close(): the stream ends with one sentinel per consumer, pushed after every item.
class TbbBoundedAdapter {
 public:
  static constexpr std::uint64_t kEnd = ~std::uint64_t{0};
  TbbBoundedAdapter(std::size_t capacity, unsigned consumers) : consumers_(consumers) {
    q_.set_capacity(static_cast<std::ptrdiff_t>(capacity));
  }
  struct Handle {
    TbbBoundedAdapter& a;
    void push(std::uint64_t v) { a.q_.push(v); }
    bool pop(std::uint64_t& v) {
      a.q_.pop(v);
      return v != kEnd;
    }
  };
  Handle make_producer() { return {*this}; }
  Handle make_consumer() { return {*this}; }
  void close() {
    for (unsigned c = 0; c < consumers_; ++c) q_.push(kEnd);
  }

 private:
  oneapi::tbb::concurrent_bounded_queue<std::uint64_t> q_;
  unsigned consumers_;
};

// --- the MPMC driver ---------------------------------------------------------------------------

struct MpmcResult {
  std::uint64_t count = 0, sum = 0, xr = 0;  // of the items popped (sum wraps mod 2^64)
  std::uint64_t out_of_order = 0;  // items that reached a consumer after a later item of the
                                   // same producer had (must be 0 for a FIFO queue)
  double seconds = 0;              // start signal to the last consumer done
};

// Count, sum and xor of every item that P producers of n items push.
inline MpmcResult expected_items(unsigned producers, std::uint64_t per_producer) {
  MpmcResult e;
  for (std::uint32_t p = 0; p < producers; ++p)
    for (std::uint64_t s = 0; s < per_producer; ++s) {
      const std::uint64_t v = tagged_item(p, static_cast<std::uint32_t>(s));
      ++e.count;
      e.sum += v;
      e.xr ^= v;
    }
  return e;
}

// One counter per item, for the tests: exact losses and duplicates (nullptr in experiments).
using SeenTable = std::vector<std::atomic<std::uint8_t>>;

template <class Adapter>
MpmcResult run_mpmc(unsigned producers, unsigned consumers, std::uint64_t per_producer,
                    std::size_t capacity, SeenTable* seen) {
  Adapter q(capacity, consumers);
  detail::StartGate gate;
  struct alignas(kCacheLine) Local {
    MpmcResult r;
  };
  std::vector<Local> local(consumers);
  std::chrono::steady_clock::time_point start;
  {
    std::vector<std::jthread> consumer_threads;
    for (unsigned c = 0; c < consumers; ++c)
      consumer_threads.emplace_back([&, c] {
        auto h = q.make_consumer();
        std::vector<std::int64_t> last(producers, -1);
        MpmcResult mine;
        gate.arrive_and_wait();
        std::uint64_t v = 0;
        while (h.pop(v)) {
          ++mine.count;
          mine.sum += v;
          mine.xr ^= v;
          const std::uint32_t p = static_cast<std::uint32_t>(v >> 32);
          const auto s = static_cast<std::int64_t>(v & 0xFFFFFFFFu);
          if (p < producers) {
            mine.out_of_order += s <= last[p];
            last[p] = s;
            if (seen) (*seen)[p * per_producer + static_cast<std::uint64_t>(s)].fetch_add(1);
          }
        }
        local[c].r = mine;
      });
    {
      std::vector<std::jthread> producer_threads;
      for (unsigned p = 0; p < producers; ++p)
        producer_threads.emplace_back([&, p] {
          auto h = q.make_producer();
          gate.arrive_and_wait();
          for (std::uint64_t s = 0; s < per_producer; ++s)
            h.push(tagged_item(p, static_cast<std::uint32_t>(s)));
        });
      gate.open_when(producers + consumers);
      start = std::chrono::steady_clock::now();
    }  // producers joined: every item has been pushed
    q.close();
  }  // consumers joined: every item has been popped
  MpmcResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Local& l : local) {
    r.count += l.r.count;
    r.sum += l.r.sum;
    r.xr ^= l.r.xr;
    r.out_of_order += l.r.out_of_order;
  }
  return r;
}

// What order a row promises: each producer's items reach any one consumer in order, or none.
enum class Order { fifo_per_producer, none };
struct QueueVariant : VariantInfo {
  Order order;
  std::string_view tsan_blind;  // why ThreadSanitizer cannot check this row ("" if it can)
  MpmcResult (*run)(unsigned producers, unsigned consumers, std::uint64_t per_producer,
                    std::size_t capacity, SeenTable* seen);
};

inline constexpr QueueVariant kQueueRows[] = {
    {{"v1_blocking_queue",
      "std::deque + one mutex + two condition variables: every push and pop takes the lock, and "
      "waiters sleep (exercise 2.3)"},
     Order::fifo_per_producer,
     "",
     &run_mpmc<BlockingAdapter<BoundedBlockingQueue<std::uint64_t>>>},
    {{"v2_ring_queue",
      "Vyukov's bounded ring: a CAS on a position counter and a sequence number per slot; no lock, "
      "waiting is spinning (then yielding)"},
     Order::fifo_per_producer,
     "",
     &run_mpmc<RingAdapter>},
    {{"moodycamel",
      "moodycamel::ConcurrentQueue with tokens: a block list per producer, so producers never "
      "contend with each other; unbounded"},
     Order::fifo_per_producer,
     "it synchronises with std::atomic_thread_fence, which TSan does not model",
     &run_mpmc<MoodycamelAdapter>},
    {{"tbb_bounded",
      "tbb::concurrent_bounded_queue: blocking push and pop, a bounded capacity, TBB's own "
      "spin-then-sleep monitor"},
     Order::fifo_per_producer,
     "it synchronises inside libtbb, which is not built with TSan",
     &run_mpmc<TbbBoundedAdapter>},
};
inline constexpr VariantTable kQueueVariants{kQueueRows};

// --- stacks ------------------------------------------------------------------------------------

// The comparison point for the Treiber stack: the obvious stack under one mutex.
template <class T>
class LockedStack {
 public:
  explicit LockedStack(std::uint32_t capacity) : capacity_(capacity) { items_.reserve(capacity); }
  bool push(T v) {
    std::lock_guard lock(mu_);
    if (items_.size() >= capacity_) return false;
    items_.push_back(std::move(v));
    return true;
  }
  std::optional<T> pop() {
    std::lock_guard lock(mu_);
    if (items_.empty()) return std::nullopt;
    std::optional<T> v(std::move(items_.back()));
    items_.pop_back();
    return v;
  }

 private:
  std::mutex mu_;
  std::vector<T> items_;
  std::uint32_t capacity_;
};

struct StackResult {
  std::uint64_t pushed_sum = 0, pushed_xr = 0, pushed = 0;
  std::uint64_t popped_sum = 0, popped_xr = 0, popped = 0;
  std::uint64_t full = 0;  // pushes refused because the stack was full (retried)
  bool stuck = false;      // a push or pop could not succeed for kStackStuckAfter: nodes lost
  double seconds = 0;

  // Every item pushed was popped exactly once (as far as count, sum and xor can tell).
  bool conserved() const {
    return !stuck && popped == pushed && popped_sum == pushed_sum && popped_xr == pushed_xr;
  }
};

// A correct stack never makes a thread wait this long for a push or a pop (see below); a broken
// one (lost nodes) would make it wait for ever. The driver gives up and says so instead.
inline constexpr std::chrono::seconds kStackStuckAfter{5};

namespace detail {

// `threads` threads each push a burst of `burst` items, then pop `burst` items, for `rounds`
// rounds or until `duration` has passed (if nonzero); the main thread drains what is left.
// Capacity is threads x burst: the items in the stack never exceed it, so a push fails only
// while another thread is between taking a node off the stack and returning it to the pool, and
// a pop cannot find the stack empty for long (this thread's own burst is in it, or was taken by
// a thread that pushed a burst of its own). Every wait is bounded by kStackStuckAfter.
template <class Stack>
StackResult stack_driver(unsigned threads, std::uint64_t rounds, unsigned burst,
                         std::chrono::milliseconds duration, SeenTable* seen) {
  Stack stack(static_cast<std::uint32_t>(threads * burst));
  StartGate gate;
  alignas(kCacheLine) std::atomic<bool> stop{false};
  alignas(kCacheLine) std::atomic<bool> stuck{false};
  struct alignas(kCacheLine) Local {
    StackResult r;
  };
  std::vector<Local> local(threads);
  auto record_pop = [&](StackResult& r, std::uint64_t v) {
    ++r.popped;
    r.popped_sum += v;
    r.popped_xr ^= v;
    if (seen) {
      const std::uint64_t p = v >> 32, s = v & 0xFFFFFFFFu;
      if (p < threads && s < rounds * burst) (*seen)[p * rounds * burst + s].fetch_add(1);
    }
  };
  // Retries `attempt` until it succeeds; false if it has not for kStackStuckAfter (or another
  // thread has given up already).
  auto retry = [&stuck](auto attempt) {
    SpinWait w;
    std::chrono::steady_clock::time_point first{};
    for (std::uint32_t tries = 0; !attempt(); ++tries) {
      if (stuck.load(std::memory_order_relaxed)) return false;
      if ((tries & 1023) == 1023) {
        const auto now = std::chrono::steady_clock::now();
        if (first == std::chrono::steady_clock::time_point{})
          first = now;
        else if (now - first > kStackStuckAfter) {
          stuck.store(true, std::memory_order_relaxed);
          return false;
        }
      }
      w.wait();
    }
    return true;
  };
  std::chrono::steady_clock::time_point start;
  {
    std::vector<std::jthread> team;
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        StackResult mine;
        gate.arrive_and_wait();
        std::uint32_t seq = 0;
        for (std::uint64_t r = 0; r < rounds && !stop.load(std::memory_order_relaxed); ++r) {
          for (unsigned b = 0; b < burst; ++b) {
            const std::uint64_t v = tagged_item(t, seq++);
            if (!retry([&] { return stack.push(v) || (++mine.full, false); })) break;
            ++mine.pushed;
            mine.pushed_sum += v;
            mine.pushed_xr ^= v;
          }
          for (unsigned b = 0; b < burst; ++b) {
            std::optional<std::uint64_t> v;
            if (!retry([&] { return (v = stack.pop()).has_value(); })) break;
            record_pop(mine, *v);
          }
          if (stuck.load(std::memory_order_relaxed)) break;
        }
        local[t].r = mine;
      });
    gate.open_when(threads);
    start = std::chrono::steady_clock::now();
    if (duration.count() > 0) {
      std::this_thread::sleep_for(duration);
      stop.store(true, std::memory_order_relaxed);
    }
  }
  StackResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Local& l : local) {
    r.pushed += l.r.pushed;
    r.pushed_sum += l.r.pushed_sum;
    r.pushed_xr ^= l.r.pushed_xr;
    r.popped += l.r.popped;
    r.popped_sum += l.r.popped_sum;
    r.popped_xr ^= l.r.popped_xr;
    r.full += l.r.full;
  }
  r.stuck = stuck.load();
  // Drain, boundedly: a corrupted stack can hold a cycle and never run empty.
  for (std::uint64_t left = r.pushed - std::min(r.pushed, r.popped) + threads * burst; left > 0;
       --left) {
    std::optional<std::uint64_t> v = stack.pop();
    if (!v) break;
    record_pop(r, *v);
  }
  return r;
}

}  // namespace detail

// Fixed work: `rounds` rounds per thread (the experiments and the exact tests, with `seen`).
template <class Stack>
StackResult run_stack(unsigned threads, std::uint64_t rounds, unsigned burst, SeenTable* seen) {
  return detail::stack_driver<Stack>(threads, rounds, burst, std::chrono::milliseconds{0}, seen);
}

// Fixed time, bursts of one: `threads` threads churning a stack of `threads` nodes for
// `duration`. With more threads than cores, threads are preempted in the middle of an operation
// all the time, which is when ABA strikes (a stack without tags loses and duplicates items here
// within a second, usually).
template <class Stack>
StackResult stress_stack(unsigned threads, std::chrono::milliseconds duration) {
  return detail::stack_driver<Stack>(threads, ~std::uint64_t{0}, 1, duration, nullptr);
}

struct StackVariant : VariantInfo {
  StackResult (*run)(unsigned threads, std::uint64_t rounds, unsigned burst, SeenTable* seen);
  StackResult (*stress)(unsigned threads, std::chrono::milliseconds duration);
};

inline constexpr StackVariant kStackRows[] = {
    {{"locked_stack", "std::vector under one std::mutex: simple, and every operation serialises"},
     &run_stack<LockedStack<std::uint64_t>>,
     &stress_stack<LockedStack<std::uint64_t>>},
    {{"treiber_stack",
      "Treiber's lock-free stack: one CAS on a tagged {index, tag} head per operation, nodes from "
      "a lock-free pool (exercise 2.5)"},
     &run_stack<TreiberStack<std::uint64_t>>,
     &stress_stack<TreiberStack<std::uint64_t>>},
};
inline constexpr VariantTable kStackVariants{kStackRows};

}  // namespace concurdl::locks
