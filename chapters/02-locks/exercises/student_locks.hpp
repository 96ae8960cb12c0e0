// Exercises 2.1 and 2.2 (chapter 02, exercises.md): two spinlocks.
// The references are in include/concurdl/locks/spinlocks.hpp (TtasBackoffLock, TicketLock):
// try first, read after. Helpers you may use: cpu_relax() and Backoff from
// include/concurdl/locks/spin.hpp.
// Check them:  concurdl exercise ch02        (tests, then a timing against the reference)
// or faster:   ch02_tests --gtest_filter='LockEx2_1/*:LockEx2_2/*:TicketFifo/student*'
#pragma once

#include <atomic>
#include <cstdint>

#include "concurdl/core/errors.hpp"
#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

// Exercise 2.1: test-and-test-and-set with exponential backoff.
// lock(): wait while the lock looks taken, reading it with a plain (relaxed) load and calling
// cpu_relax() in the loop; when it looks free, try to take it with one exchange. If the exchange
// loses the race, back off for a random, growing time (a Backoff object does exactly that) and
// start again. try_lock(): one attempt, never waits. unlock(): release the flag.
// Think about: which operations need memory_order_acquire, which release, and which may be
// relaxed? (spinlocks.hpp's header comment says why.) Delete each CDL_TODO as you fill it in.
class StudentTtasBackoffLock {
 public:
  void lock() { CDL_TODO("2.1 TTAS lock with exponential backoff"); }
  bool try_lock() { CDL_TODO("2.1 TTAS lock with exponential backoff"); }
  void unlock() { CDL_TODO("2.1 TTAS lock with exponential backoff"); }

 private:
  std::atomic<bool> locked_{false};
};

// Exercise 2.2: a ticket lock.
// lock(): take the next ticket from next_ (one atomic read-modify-write), then wait until serving_
// shows your ticket. unlock(): let the next ticket in. try_lock(): take a ticket only if it would
// be served at once (nobody holds or waits: next_ == serving_), without ever waiting; a
// compare-exchange does it. The lock must be FIFO: the tests queue threads up one by one and
// check that they get the lock in that order. queued() is given (the tests use it).
class StudentTicketLock {
 public:
  void lock() { CDL_TODO("2.2 ticket lock"); }
  bool try_lock() { CDL_TODO("2.2 ticket lock"); }
  void unlock() { CDL_TODO("2.2 ticket lock"); }

  // Given: threads holding or waiting for the lock (a snapshot).
  std::uint32_t queued() const {
    return next_.load(std::memory_order_relaxed) - serving_.load(std::memory_order_relaxed);
  }

 private:
  alignas(kCacheLine) std::atomic<std::uint32_t> next_{0};
  alignas(kCacheLine) std::atomic<std::uint32_t> serving_{0};
};

}  // namespace concurdl::locks
