// Five spinlocks, simplest first, each one change away from the one before, and std::mutex as
// the baseline they are measured against (lock_variants.hpp has the table; run
// `concurdl run ch02/lock_throughput`: acquisitions/s and Jain's fairness index).
//
//   v1 TasLock          every waiter hammers the line with atomic exchanges (writes)
//   v2 TtasLock         waiters spin on a plain read (the line stays shared in every cache)
//                       and only try the exchange when the lock looks free
//   v3 TtasBackoffLock  v2 + randomised exponential backoff after a lost race: fewer threads
//                       storm the line at each release
//   v4 TicketLock       take a number, wait until it is served: FIFO, so no thread starves,
//                       but every waiter still spins on the one `serving` line
//   v5 McsLock          a queue of per-thread nodes: each waiter spins on its own line, and a
//                       release touches one waiter only (O(1) cache traffic per hand-over)
//   std::mutex          a futex: one atomic try, then sleeps in the kernel (glibc's default
//                       mutex does not spin; PTHREAD_MUTEX_ADAPTIVE_NP would); a release wakes one
//
// Every lock satisfies Lockable (lock, unlock, try_lock), so std::lock_guard, std::unique_lock
// and std::scoped_lock work with all of them.
//
// Memory order, once for all: lock() must ACQUIRE and unlock() must RELEASE. The release store
// in unlock() publishes every write made inside the critical section; the acquire that reads
// it in the next lock() makes those writes visible to the next holder. Nothing stronger
// (seq_cst) is needed, and nothing weaker is correct: with relaxed, the compiler and the CPU may
// move the protected writes out past the unlock.
//
// Pure spinlocks never yield: while the holder is descheduled, every waiter burns its whole time
// slice. With more threads than cores this is a collapse, not a slowdown, and FIFO locks (v4,
// v5) are hit hardest: the lock goes to the *next in line*, who may not be running at all.
// std::mutex sleeps instead, which is why it is the default for good reasons.
//
// Priority inversion (the lesson discusses it; not demonstrated here, it needs real-time
// priorities): a low-priority thread L holds a lock, a high-priority thread H waits for it, and
// a medium-priority thread M, which needs no lock at all, preempts L. H now waits for M, a
// thread of lower priority: the priorities are inverted, for as long as M runs (the Mars
// Pathfinder reset itself over exactly this). With a spinlock it is worse: H spinning on one
// core can keep L from ever running there. Remedies: priority inheritance (L runs at H's priority
// while it holds the lock: PTHREAD_PRIO_INHERIT mutexes), priority ceilings, or not sharing locks
// across priorities.
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <mutex>
#include <stdexcept>

#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

// What std::lock_guard / std::scoped_lock need (the standard's Lockable requirement).
template <class L>
concept Lockable = requires(L& l) {
  l.lock();
  l.unlock();
  { l.try_lock() } -> std::convertible_to<bool>;
};

// v1 test-and-set: lock = "set the flag and tell me what it was" until it was clear.
// Every failed attempt is an atomic read-modify-write, i.e. a request for the line in exclusive
// state: N waiters bounce the line between their cores continuously, slowing the holder's own
// accesses (and its unlock) down with them.
class TasLock {
 public:
  void lock() {
    // acquire: see the previous holder's critical section (its release in unlock()).
    while (flag_.test_and_set(std::memory_order_acquire)) cpu_relax();
  }
  bool try_lock() { return !flag_.test_and_set(std::memory_order_acquire); }
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_;  // clear (unlocked) since C++20
};

// v2 test-and-test-and-set: wait with loads, and exchange only when the lock looks free.
// Loads of a line held shared hit in each waiter's own cache: no traffic while the lock is held.
// At each release, though, all waiters see "free" at once and all exchange: a burst of N
// read-for-ownership requests, of which one wins (the "thundering herd").
class TtasLock {
 public:
  void lock() {
    while (true) {
      // relaxed is enough for peeking: the acquire that matters is the exchange's.
      while (locked_.load(std::memory_order_relaxed)) cpu_relax();
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// v3 TTAS with exponential backoff: a thread that saw the lock free but lost the exchange waits a
// random, doubling time before looking again. Under contention most waiters are backing off at
// any moment, so a release meets a few exchanges instead of N. Exercise 2.1 writes this lock.
// The price: a lock released while everyone backs off stays idle for a while (worse latency at
// low contention, and a long backoff is unfair to whoever waited longest).
class TtasBackoffLock {
 public:
  void lock() {
    Backoff backoff;
    while (true) {
      while (locked_.load(std::memory_order_relaxed)) cpu_relax();
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      backoff.pause();
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// v4 ticket lock: a bakery. fetch_add on `next_` hands out numbers; the lock belongs to whoever's
// number `serving_` shows. Arrival order is service order (FIFO): no thread can be overtaken
// forever, so the Jain fairness index is close to 1 where TAS's can be far from it. Exercise 2.2.
// Every waiter still spins on `serving_`, and each unlock invalidates it in every waiter's cache.
// The two counters live on separate lines: arrivals (fetch_add on next_) must not disturb the
// waiters polling serving_.
class TicketLock {
 public:
  void lock() {
    // relaxed: a ticket is only a number; the synchronisation is the acquire load of serving_.
    const std::uint32_t ticket = next_.fetch_add(1, std::memory_order_relaxed);
    while (serving_.load(std::memory_order_acquire) != ticket) cpu_relax();
  }
  bool try_lock() {
    std::uint32_t ticket = serving_.load(std::memory_order_acquire);
    // Free means "nobody holds or waits": next == serving. Take that ticket if still nobody has.
    return next_.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }
  void unlock() {
    // Only the holder writes serving_, so a load and a store (no read-modify-write) suffice;
    // release publishes the critical section to the next ticket's acquire load.
    serving_.store(serving_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // Threads holding or waiting for the lock (tests use it to stage a queue; a snapshot only).
  std::uint32_t queued() const {
    return next_.load(std::memory_order_relaxed) - serving_.load(std::memory_order_relaxed);
  }

 private:
  alignas(kCacheLine) std::atomic<std::uint32_t> next_{0};
  alignas(kCacheLine) std::atomic<std::uint32_t> serving_{0};
};

// v5 MCS queue lock (Mellor-Crummey and Scott, 1991): waiters form a linked queue of nodes, and
// each spins on the `locked` flag in its OWN node, on its own cache line. unlock() writes only
// the successor's flag: one line moves per hand-over, whatever the number of waiters. FIFO, like
// the ticket lock. Java's and Linux's queued spinlocks descend from it.
//
//   tail_ ──▶ [node C] ◀─next── [node B] ◀─next── [node A: holder]
//              spins on           spins on          unlock(): B.locked = false
//              C.locked           B.locked
//
// Lockable needs lock() and unlock() without arguments, but MCS needs a node per acquisition.
// Two ways to get one:
//   - McsLock::Guard, the classic form: the node lives in the guard, on the stack;
//   - lock()/unlock(): the node comes from a small thread_local array (a thread may hold up to
//     kMaxHeld MCS locks at once, released in any order), and the holder keeps a pointer to it
//     in holder_node_, which only the holder reads or writes: the lock itself protects it.
class McsLock {
 public:
  struct alignas(kCacheLine) Node {
    std::atomic<Node*> next{nullptr};
    std::atomic<bool> locked{false};
    bool in_use = false;  // thread_local bookkeeping for lock()/unlock() only
  };

  static constexpr int kMaxHeld = 16;

  void lock() {
    Node* node = take_node();
    acquire(node);
    holder_node_ = node;
  }
  bool try_lock() {
    Node* node = take_node();
    node->next.store(nullptr, std::memory_order_relaxed);
    Node* expected = nullptr;
    // Free means an empty queue: enqueue ourselves as the only node, or give up.
    if (tail_.compare_exchange_strong(expected, node, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      holder_node_ = node;
      return true;
    }
    node->in_use = false;
    return false;
  }
  void unlock() {
    Node* node = holder_node_;
    release(node);
    node->in_use = false;
  }

  // The classic interface: McsLock::Guard g(lock); the node is the guard's.
  class Guard {
   public:
    explicit Guard(McsLock& lock) : lock_(lock) { lock_.acquire(&node_); }
    ~Guard() { lock_.release(&node_); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    McsLock& lock_;
    Node node_;
  };

 private:
  void acquire(Node* node) {
    node->next.store(nullptr, std::memory_order_relaxed);
    node->locked.store(true, std::memory_order_relaxed);
    // acq_rel exchange: release publishes our node's initialisation to whoever links to it;
    // acquire pairs with the previous holder's release when the queue was empty (we own it now).
    Node* prev = tail_.exchange(node, std::memory_order_acq_rel);
    if (prev == nullptr) return;
    // Link behind the predecessor; release so that it sees our node initialised before it
    // writes node->locked = false.
    prev->next.store(node, std::memory_order_release);
    // acquire: the predecessor's release of our flag carries its critical section to us.
    while (node->locked.load(std::memory_order_acquire)) cpu_relax();
  }

  void release(Node* node) {
    Node* succ = node->next.load(std::memory_order_acquire);
    if (succ == nullptr) {
      // No successor linked yet. If we are still the tail, the queue becomes empty: done.
      Node* expected = node;
      if (tail_.compare_exchange_strong(expected, nullptr, std::memory_order_release,
                                        std::memory_order_relaxed))
        return;
      // Someone swapped themselves into tail_ but has not linked to us yet: wait for the link
      // (a few instructions away on their side).
      while ((succ = node->next.load(std::memory_order_acquire)) == nullptr) cpu_relax();
    }
    succ->locked.store(false, std::memory_order_release);
  }

  static Node* take_node() {
    thread_local std::array<Node, kMaxHeld> nodes;
    for (Node& n : nodes)
      if (!n.in_use) {
        n.in_use = true;
        return &n;
      }
    throw std::logic_error("McsLock: a thread holds more than kMaxHeld MCS locks at once");
  }

  alignas(kCacheLine) std::atomic<Node*> tail_{nullptr};
  Node* holder_node_ = nullptr;  // written and read by the holder only
};

// The baseline, wrapped only to give it a name in templates and tables.
using StdMutex = std::mutex;

static_assert(Lockable<TasLock> && Lockable<TtasLock> && Lockable<TtasBackoffLock> &&
              Lockable<TicketLock> && Lockable<McsLock> && Lockable<StdMutex>);

}  // namespace concurdl::locks
