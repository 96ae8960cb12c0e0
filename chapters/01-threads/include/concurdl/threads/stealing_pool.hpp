// A work-stealing pool: what oneTBB, Java's ForkJoinPool, Go's scheduler and Rayon do instead of
// ThreadPool's one shared queue. Four changes, each against a cost that ch01/task_overhead
// measures on the simple pool:
//
//   1. A lane (a deque and its own mutex) per thread instead of one queue for all. A thread
//      pushes to and pops from the back of its own lane (newest first: its data is still in
//      cache); a thread with nothing to do steals from the front of another's (oldest first:
//      usually the biggest piece of work left). Threads meet on a lock only when one steals.
//   2. A thief takes half of what it finds, not one task: a batch submitted from one thread is
//      spread over the others in a few steals, not one lock round trip per task.
//   3. No future per task. post(f) is fire-and-forget like task_group::run: the task's
//      exception, if any, is kept and rethrown by wait_all(). (submit(f) still returns a future
//      for the callers who want one, at the price of its shared state.)
//   4. Idle threads spin for a few microseconds before they sleep, and the thread that waits in
//      wait_all() runs tasks itself. A burst of tiny tasks then never pays a futex wake-up per
//      task; a pool left idle still sleeps.
//   5. A lane's lock spins (LaneLock below) instead of sleeping. glibc's std::mutex goes to the
//      kernel (futex wait, then a futex wake from the unlocker) the first time it finds the
//      lock taken; a lane is held for a few deque operations, far shorter than that round trip.
//      With std::mutex, a thief stealing from the lane its owner is filling made tiny tasks
//      cost 100-300 ns each at 2 threads (a few microseconds per contended steal, about four
//      tasks per steal) against 25-55 with the spinning lock, which also steals bigger batches
//      (the owner is not asleep in the kernel while the thief looks). The lock is a template
//      parameter so that task_overhead can run the std::mutex version beside it
//      (v6_stealing_pool_mutex): StealingPool is BasicStealingPool<LaneLock>.
//
// Contract (compare ThreadPool's):
//   - StealingPool(threads): `threads` threads run tasks: threads - 1 workers started by the
//     constructor, plus the thread that calls wait_all(), as in a oneTBB arena of that size.
//     With threads == 1 there is no worker and tasks run only inside wait_all() (a future's
//     get() would wait forever: call wait_all() first).
//   - post(f) queues f; submit(f) queues f and returns a std::future for its result.
//   - wait_all() runs queued tasks on the calling thread until the pool is idle: every task
//     posted before the call, and every task those tasks posted, has finished. Then it rethrows
//     the first exception that a posted task threw since the last wait_all() (and forgets it).
//   - The destructor finishes every queued task, then joins the workers; post() from outside
//     the pool after destruction has begun throws std::runtime_error.
//   - Tasks may post further tasks; a task must not call wait_all().
// Code: src/stealing_pool.cpp   Run: concurdl run ch01/task_overhead (row v5_stealing_pool)
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "concurdl/core/hardware.hpp"

namespace concurdl::threads {

// A test-and-test-and-set lock for critical sections of a few dozen instructions: spin on a
// plain load (the line stays shared in both caches until the holder releases it), then retry the
// exchange. After 64 pauses it yields on every try: with more threads than cores, the holder
// may be preempted, and spinning would only burn the time slice it needs.
class LaneLock {
 public:
  void lock() {
    unsigned spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64)
          cpu_relax();
        else
          std::this_thread::yield();
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Lock: LaneLock or std::mutex (both instantiated in stealing_pool.cpp).
template <class Lock>
class BasicStealingPool {
 public:
  explicit BasicStealingPool(unsigned threads);
  ~BasicStealingPool();
  BasicStealingPool(const BasicStealingPool&) = delete;
  BasicStealingPool& operator=(const BasicStealingPool&) = delete;

  template <class F>
  void post(F&& f) {
    push(std::function<void()>(std::forward<F>(f)));
  }

  template <class F>
  auto submit(F&& f) -> std::future<std::invoke_result_t<std::decay_t<F>>> {
    using R = std::invoke_result_t<std::decay_t<F>>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> result = task->get_future();
    push([task] { (*task)(); });
    return result;
  }

  void wait_all();
  unsigned size() const { return static_cast<unsigned>(lanes_.size()); }

 private:
  // One per thread, on its own cache lines so that two lanes' mutexes never share one.
  struct alignas(kCacheLine) Lane {
    Lock mu;
    std::deque<std::function<void()>> tasks;  // guarded by mu
    // tasks.size(), written under mu and read without it: a thief skips empty lanes without
    // taking their locks. Only a hint; the lock decides.
    std::atomic<std::size_t> size{0};
  };

  void push(std::function<void()> job);
  bool pop_or_steal(std::size_t self, std::function<void()>& job);
  void run(std::function<void()>& job);
  void idle(bool waiting_caller);
  void worker_loop(std::size_t self);
  void help_until_idle();
  void stop_and_join();

  // lanes_[0] belongs to threads outside the pool (the caller of post and wait_all); lanes_[i]
  // to worker i for i >= 1.
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::thread> workers_;

  // seq_cst throughout: a sleeper publishes `sleepers_` then reads `queued_`, a pusher
  // publishes `queued_` then reads `sleepers_`; in one total order one of them sees the other,
  // so a task is never left queued while every thread sleeps (see idle() and push()).
  std::atomic<std::int64_t> queued_{0};   // tasks in the lanes
  std::atomic<std::int64_t> pending_{0};  // posted and not yet finished (queued + running)
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mu_;
  std::condition_variable wake_;  // work was queued, the pool went idle, or it is stopping

  std::mutex error_mu_;
  std::exception_ptr first_error_;  // guarded by error_mu_
};

extern template class BasicStealingPool<LaneLock>;
extern template class BasicStealingPool<std::mutex>;

using StealingPool = BasicStealingPool<LaneLock>;

}  // namespace concurdl::threads
