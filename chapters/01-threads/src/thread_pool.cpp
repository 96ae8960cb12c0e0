// The reference thread pool: one mutex-protected deque, two condition variables. Simple on
// purpose: every task crosses the one lock. StealingPool (stealing_pool.hpp) shows how per-thread
// lanes and work stealing avoid it; chapter 02 measures what a contended lock costs.
#include "concurdl/threads/thread_pool.hpp"

#include <stdexcept>

namespace concurdl::threads {

ThreadPool::ThreadPool(unsigned workers) {
  if (workers == 0) throw std::invalid_argument("ThreadPool: need at least one worker");
  workers_.reserve(workers);
  try {
    for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (...) {
    // Thread creation failed part-way (EAGAIN: a thread limit). The destructor will not run for
    // a half-built object, and a joinable std::thread destroyed unjoined calls std::terminate:
    // stop and join the workers already started, then let the caller see the error.
    stop_and_join();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_and_join(); }

void ThreadPool::stop_and_join() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& w : workers_) w.join();  // workers drain the queue before they exit
}

void ThreadPool::enqueue(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw std::runtime_error("ThreadPool: submit after shutdown began");
    queue_.push_back(std::move(job));
    ++pending_;
  }
  work_ready_.notify_one();
}

void ThreadPool::wait_all() {
  std::unique_lock lock(mu_);
  all_done_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::worker_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to do
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();          // packaged_task stores any exception in the future; nothing escapes here
    job = nullptr;  // destroy the task (and what it captured) outside the lock
    lock.lock();
    if (--pending_ == 0) all_done_.notify_all();
  }
}

}  // namespace concurdl::threads
