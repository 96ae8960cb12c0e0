// Exercise 1.3: a thread pool's submit and wait_all (chapter 01, exercises.md).
//
// StudentPool has the reference ThreadPool's interface and contract
// (include/concurdl/threads/thread_pool.hpp). The consumer side is written for you: the
// constructor starts the workers, worker_loop() takes jobs off the queue, runs them and counts
// them done, and the destructor drains the queue and joins. You write the producer side:
//   - submit(f): wrap f so that its result or exception lands in a std::future, queue the job,
//     count it as pending, wake one worker; throw std::runtime_error once shutdown has begun.
//   - wait_all(): block until nothing is pending (queued or running).
// Check it:   concurdl exercise ch01      (tests, then a timing against the reference pool)
// or faster:  ch01_tests --gtest_filter='PoolTyped/student.*'
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "concurdl/core/errors.hpp"

namespace concurdl::threads {

class StudentPool {
 public:
  explicit StudentPool(unsigned workers) {
    if (workers == 0) throw std::invalid_argument("StudentPool: need at least one worker");
    workers_.reserve(workers);
    try {
      for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
    } catch (...) {
      stop_and_join();  // a thread failed to start: join the ones that did, then report
      throw;
    }
  }

  ~StudentPool() { stop_and_join(); }

  StudentPool(const StudentPool&) = delete;
  StudentPool& operator=(const StudentPool&) = delete;

  // Queue f and return a future for its result. Hints: std::packaged_task<R()> turns a callable
  // into one whose result (or exception) goes to a future; it is move-only, and std::function
  // needs a copyable callable, so hold the task by std::shared_ptr. Everything worker_loop()
  // reads (queue_, pending_, stopping_) is guarded by mu_.
  template <class F>
  auto submit([[maybe_unused]] F&& f) -> std::future<std::invoke_result_t<std::decay_t<F>>> {
    CDL_TODO("1.3 thread pool submit and wait_all");
  }

  // Block until every submitted task, and every task those tasks submitted, has finished.
  // worker_loop() notifies all_done_ when pending_ drops to zero.
  void wait_all() { CDL_TODO("1.3 thread pool submit and wait_all"); }

  unsigned size() const { return static_cast<unsigned>(workers_.size()); }

 private:
  void stop_and_join() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    for (auto& w : workers_) w.join();  // workers drain the queue before they exit
  }

  // Given: sleep until there is a job or the pool is stopping; run jobs outside the lock (a job
  // may take long, and may itself call submit); exit only when stopping and the queue is empty,
  // so no queued job is ever dropped.
  void worker_loop() {
    std::unique_lock lock(mu_);
    while (true) {
      work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      job();          // must not throw: submit's wrapper has to keep exceptions for the future
      job = nullptr;  // destroy it outside the lock
      lock.lock();
      if (--pending_ == 0) all_done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_ready_;  // a job was queued, or the pool is stopping
  std::condition_variable all_done_;    // pending_ reached zero
  std::deque<std::function<void()>> queue_;
  std::size_t pending_ = 0;  // queued + running: submit adds one, worker_loop removes it
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace concurdl::threads
