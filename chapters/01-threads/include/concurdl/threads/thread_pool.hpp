// A fixed-size thread pool: the structure every framework keeps (PyTorch's intra-op pool, TBB's
// arena, a data loader's workers) because creating a thread per task costs tens of microseconds.
//
// Contract:
//   - `workers` threads are started by the constructor and live until the destructor.
//   - submit(f) queues f and returns a std::future for its result; an exception thrown by f is
//     stored in that future and rethrown by get(), never lost and never fatal to the pool.
//   - wait_all() blocks until the pool is idle: every task submitted before the call, and every
//     task those tasks submitted, has finished (a task submitted concurrently by another thread
//     may or may not be waited for).
//   - The destructor finishes every task already queued (none is dropped), then joins the
//     workers. submit() after destruction has begun throws std::runtime_error.
//   - Tasks may submit further tasks; a task must not call wait_all() (it would wait on itself).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace concurdl::threads {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  template <class F>
  auto submit(F&& f) -> std::future<std::invoke_result_t<std::decay_t<F>>> {
    using R = std::invoke_result_t<std::decay_t<F>>;
    // packaged_task is move-only and std::function needs copyable callables: hold it by pointer.
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> result = task->get_future();
    enqueue([task] { (*task)(); });
    return result;
  }

  void wait_all();
  unsigned size() const { return static_cast<unsigned>(workers_.size()); }

 private:
  void enqueue(std::function<void()> job);
  void worker_loop();
  void stop_and_join();

  std::mutex mu_;
  std::condition_variable work_ready_;  // a job was queued, or the pool is stopping
  std::condition_variable all_done_;    // pending_ reached zero
  std::deque<std::function<void()>> queue_;
  std::size_t pending_ = 0;  // queued + running
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace concurdl::threads
