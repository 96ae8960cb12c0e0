// The hazards of locking, made runnable and detected, each next to its fix.
// Run: concurdl run ch02/hazards. Tests: ch02_tests --gtest_filter='Hazards*:Transfer*'.
//
// Deadlock: two bank transfers, A->B and B->A, each lock the source account, then the
// destination. Each holds the lock the other needs, and both wait forever.
//
//   worker 0: lock(A) ... lock(B)  waits         wait-for graph:  worker 0 ──waits for B──▶
//   worker 1: lock(B) ... lock(A)  waits                          worker 1 ──waits for A──▶ (cycle)
//
//   Detection: every TrackedMutex reports to a LockMonitor who holds it and who waits for it.
//   A watchdog thread watches a progress counter; when it has not moved for `timeout`, it reads
//   the wait-for graph (thread -> the thread holding the lock it waits for), reports the cycle
//   by name, and aborts the waits (a TrackedMutex waits in short try_lock_for slices and gives
//   up by throwing LockAborted), so the demonstration ends and says what happened.
//   Fix: take both locks at once with std::scoped_lock (std::lock's deadlock-avoidance
//   algorithm: lock one, try the others, back off and retry in another order), or always lock
//   in one global order (by account id or address). transfer_ordered does the first; exercise
//   2.4 asks for either.
//
// Livelock: two polite threads each need both locks. Each takes its first, tries the second,
// and if that fails releases the first and tries again, at the same moment as the other. Both
// are busy all the time and neither gets anywhere. Real livelocks need matching timing; here a
// barrier provides it (the threads run in lockstep rounds), so the demonstration behaves the same
// on every run. It is bounded by a round cap and reports "no progress in N rounds".
//   Fix: randomised backoff. After a failure, sit out a random number of rounds (doubling the
//   range each time): soon one thread tries alone and succeeds. Ethernet's fix for colliding
//   senders, and TtasBackoffLock's jitter, are the same idea.
//
// Starvation: see ch02/lock_throughput's jain_index (Jain's index of acquisitions per thread,
// for every lock).
// Priority inversion: see the comment in spinlocks.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace concurdl::locks {

class TrackedMutex;

// Thrown by TrackedMutex::lock() when the monitor has aborted the run (the watchdog fired).
class LockAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Who holds and who waits for which TrackedMutex, by thread name; and a progress counter.
// A debugging tool in the spirit of Linux's lockdep or a debug-mode lock checker: every lock
// operation takes the monitor's own mutex, so it is slow on purpose.
class LockMonitor {
 public:
  // `window`: after lock() acquires, the thread sleeps this long while holding the lock. Zero in
  // production; a stress test widens the race window so that a latent deadlock (a lock-order
  // inversion that happens once a week) shows in milliseconds.
  explicit LockMonitor(std::chrono::microseconds window = std::chrono::microseconds{0})
      : window_(window) {}

  void name_this_thread(std::string name);
  void progress() { progress_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t progress_count() const { return progress_.load(std::memory_order_relaxed); }

  void abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // The wait-for graph's cycle, by name ("" if there is none), and everyone's state.
  std::string find_cycle() const;
  std::string describe() const;

  std::chrono::microseconds window() const { return window_; }

 private:
  friend class TrackedMutex;
  void waiting(const TrackedMutex* m);
  void acquired(const TrackedMutex* m);
  void gave_up(const TrackedMutex* m);
  void released(const TrackedMutex* m);
  std::string name_of(std::thread::id id) const;  // caller holds mu_

  struct ThreadState {
    std::string name;
    std::vector<const TrackedMutex*> holds;
    const TrackedMutex* waits_for = nullptr;
  };
  mutable std::mutex mu_;
  std::map<std::thread::id, ThreadState> threads_;
  std::map<const TrackedMutex*, std::thread::id> owner_;
  std::atomic<std::uint64_t> progress_{0};
  std::atomic<bool> aborted_{false};
  const std::chrono::microseconds window_;
};

// A named, timed mutex that reports to a LockMonitor. Lockable: std::lock_guard and
// std::scoped_lock work with it. lock() waits in slices of try_lock_for, so that it can notice
// the monitor's abort; it then throws LockAborted (holding nothing it did not hold before).
class TrackedMutex {
 public:
  TrackedMutex(std::string name, LockMonitor& monitor)
      : name_(std::move(name)), monitor_(monitor) {}
  TrackedMutex(const TrackedMutex&) = delete;
  TrackedMutex& operator=(const TrackedMutex&) = delete;

  void lock();
  bool try_lock();
  void unlock();
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  LockMonitor& monitor_;
  std::timed_mutex mu_;
};

// --- deadlock: bank transfers ------------------------------------------------------------------

struct Account {
  Account(std::string name, std::int64_t balance, LockMonitor& monitor)
      : mu(std::move(name), monitor), balance(balance) {}
  TrackedMutex mu;
  std::int64_t balance;  // protected by mu
};

// Moves `amount` from `from` to `to`, holding both accounts' locks. Must not deadlock when
// another thread transfers in the opposite direction at the same time.
using TransferFn = void (*)(Account& from, Account& to, std::int64_t amount);

// Locks the source, then the destination: deadlocks against a transfer the other way.
void transfer_naive(Account& from, Account& to, std::int64_t amount);
// std::scoped_lock(from.mu, to.mu): both at once, deadlock-free (exercise 2.4's reference).
void transfer_ordered(Account& from, Account& to, std::int64_t amount);

struct TransferOptions {
  unsigned threads = 2;
  unsigned accounts = 2;  // >= 2; threads 2k and 2k+1 move money between accounts k and k+1
                          // (mod accounts), in opposite directions
  std::uint64_t transfers_per_thread = 200;
  std::chrono::milliseconds timeout{200};  // the watchdog fires after this long without progress
  std::chrono::microseconds window{50};    // see LockMonitor
};

struct TransferOutcome {
  bool finished = false;           // every transfer was made
  bool deadlock_detected = false;  // the watchdog fired (and aborted the waits)
  bool cycle_found = false;        // ...and found a cycle in the wait-for graph
  std::string report;              // what the watchdog saw, by name
  std::uint64_t transfers_done = 0;
  std::int64_t total_before = 0, total_after = 0;  // money is conserved either way
  double seconds = 0;      // until the last thread ended (finished or aborted)
  double stalled_for = 0;  // detection: last progress until the watchdog's report
};

// Threads come in pairs that transfer between the same two accounts in opposite directions, so
// a transfer function that locks in argument order can deadlock. The watchdog ends such a run.
TransferOutcome run_transfers(TransferFn transfer, const TransferOptions& options);

// --- livelock: polite threads in lockstep ------------------------------------------------------

enum class RetryPolicy {
  immediate,   // after a failure, try again next round, like the other thread: livelock
  randomised,  // sit out a random number of rounds, the range doubling per failure: progress
};

struct LivelockOutcome {
  bool gave_up = false;         // hit the round cap before `target` successes: livelock
  std::uint64_t rounds = 0;     // lockstep rounds run
  std::uint64_t attempts = 0;   // times a thread held its first lock and tried the second
  std::uint64_t successes = 0;  // times a thread held both
  std::string report;
};

LivelockOutcome run_polite_workers(RetryPolicy policy, std::uint64_t target_successes,
                                   std::uint64_t max_rounds);

}  // namespace concurdl::locks
