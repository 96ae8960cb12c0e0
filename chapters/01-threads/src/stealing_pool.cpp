// The work-stealing pool (stealing_pool.hpp has the design and the contract).
#include "concurdl/threads/stealing_pool.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "concurdl/core/hardware.hpp"

namespace concurdl::threads {

namespace {

// Which pool and lane the current thread owns: a worker its own lane, every other thread lane 0.
thread_local const void* tls_pool = nullptr;
thread_local std::size_t tls_lane = 0;

// How long an idle thread keeps looking before it goes to sleep. Long against the gap between two
// tasks of a burst (tens of nanoseconds), short against a futex sleep and wake-up (microseconds)
// so that an idle pool gives its cores back quickly.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr unsigned kPauses = 64;  // spins before the first yield

}  // namespace

template <class Lock>
BasicStealingPool<Lock>::BasicStealingPool(unsigned threads) {
  if (threads == 0) throw std::invalid_argument("StealingPool: need at least one thread");
  lanes_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) lanes_.push_back(std::make_unique<Lane>());
  workers_.reserve(threads - 1);
  try {
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (...) {
    stop_and_join();  // a thread failed to start: join the ones that did, then report
    throw;
  }
}

template <class Lock>
BasicStealingPool<Lock>::~BasicStealingPool() {
  stop_and_join();
}

template <class Lock>
void BasicStealingPool<Lock>::stop_and_join() {
  stopping_.store(true);  // from here on, post() from outside the pool throws
  help_until_idle();      // queued tasks still run (here too: there may be no worker at all)
  { std::lock_guard lock(sleep_mu_); }
  wake_.notify_all();  // sleeping workers see stopping_ with nothing pending, and leave
  for (auto& w : workers_) w.join();
}

template <class Lock>
void BasicStealingPool<Lock>::push(std::function<void()> job) {
  const bool inside = tls_pool == this;
  if (!inside && stopping_.load())
    throw std::runtime_error("StealingPool: post after shutdown began");
  pending_.fetch_add(1);  // before the task is visible: it cannot finish before it is counted
  Lane& lane = *lanes_[inside ? tls_lane : 0];
  {
    std::lock_guard lock(lane.mu);
    lane.tasks.push_back(std::move(job));
    lane.size.store(lane.tasks.size(), std::memory_order_relaxed);
    queued_.fetch_add(1);  // under the lane's lock, after the push: never counts a task not there
  }
  if (sleepers_.load() > 0) {  // rare while busy: the common case is no system call at all
    { std::lock_guard lock(sleep_mu_); }
    wake_.notify_one();
  }
}

template <class Lock>
bool BasicStealingPool<Lock>::pop_or_steal(std::size_t self, std::function<void()>& job) {
  Lane& own = *lanes_[self];
  if (own.size.load(std::memory_order_relaxed) > 0) {
    std::lock_guard lock(own.mu);
    if (!own.tasks.empty()) {
      job = std::move(own.tasks.back());  // newest first: what this thread just made is in cache
      own.tasks.pop_back();
      own.size.store(own.tasks.size(), std::memory_order_relaxed);
      queued_.fetch_sub(1);
      return true;
    }
  }
  const std::size_t n = lanes_.size();
  for (std::size_t k = 1; k < n; ++k) {
    Lane& victim = *lanes_[(self + k) % n];
    if (victim.size.load(std::memory_order_relaxed) == 0) continue;
    std::vector<std::function<void()>> loot;
    {
      std::lock_guard lock(victim.mu);
      const std::size_t take = (victim.tasks.size() + 1) / 2;  // half, rounded up
      if (take == 0) continue;
      loot.reserve(take);
      for (std::size_t i = 0; i < take; ++i) {  // oldest first, from the front
        loot.push_back(std::move(victim.tasks.front()));
        victim.tasks.pop_front();
      }
      victim.size.store(victim.tasks.size(), std::memory_order_relaxed);
      queued_.fetch_sub(1);  // the one this thread runs now; the rest only change lanes
    }
    job = std::move(loot.front());
    if (loot.size() > 1) {
      std::lock_guard lock(own.mu);
      for (std::size_t i = 1; i < loot.size(); ++i) own.tasks.push_back(std::move(loot[i]));
      own.size.store(own.tasks.size(), std::memory_order_relaxed);
    }
    return true;
  }
  return false;
}

template <class Lock>
void BasicStealingPool<Lock>::run(std::function<void()>& job) {
  try {
    job();
  } catch (...) {
    std::lock_guard lock(error_mu_);
    if (!first_error_) first_error_ = std::current_exception();
  }
  job = nullptr;  // destroy what the task captured before it counts as finished
  if (pending_.fetch_sub(1) == 1 && sleepers_.load() > 0) {
    { std::lock_guard lock(sleep_mu_); }
    wake_.notify_all();  // a caller waits in wait_all(), or the pool is stopping
  }
}

// Nothing to run: spin a little, then sleep until work is queued or the thread's reason to wait
// is gone (the caller of wait_all: the pool is idle; a worker: the pool is stopping and idle).
template <class Lock>
void BasicStealingPool<Lock>::idle(bool waiting_caller) {
  auto done = [&] {
    if (queued_.load() > 0) return true;
    const bool idle_pool = pending_.load() == 0;
    return waiting_caller ? idle_pool : idle_pool && stopping_.load();
  };
  // Pause-spin briefly, then yield while looking: on an oversubscribed machine (more threads than
  // cores) a spinner would otherwise burn the time slice that the thread with the work needs.
  const auto give_up = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1;; ++i) {
    if (done()) return;
    if (i < kPauses) {
      cpu_relax();
    } else {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > give_up) break;
    }
  }
  std::unique_lock lock(sleep_mu_);
  sleepers_.fetch_add(1);  // then done() reads queued_: see the comment on the members
  wake_.wait(lock, done);
  sleepers_.fetch_sub(1);
}

template <class Lock>
void BasicStealingPool<Lock>::worker_loop(std::size_t self) {
  tls_pool = this;
  tls_lane = self;
  std::function<void()> job;
  while (true) {
    if (pop_or_steal(self, job)) {
      run(job);
      continue;
    }
    if (stopping_.load() && pending_.load() == 0) return;
    idle(false);
  }
}

template <class Lock>
void BasicStealingPool<Lock>::help_until_idle() {
  // While it runs tasks, the calling thread is one of the pool's (lane 0): a task it runs may
  // post even while the destructor drains. Restored after: it may belong to another pool.
  const void* const outer_pool = tls_pool;
  const std::size_t outer_lane = tls_lane;
  const std::size_t self = outer_pool == this ? outer_lane : 0;
  tls_pool = this;
  tls_lane = self;
  std::function<void()> job;
  while (pending_.load() != 0) {
    if (pop_or_steal(self, job))
      run(job);
    else
      idle(true);
  }
  tls_pool = outer_pool;
  tls_lane = outer_lane;
}

template <class Lock>
void BasicStealingPool<Lock>::wait_all() {
  help_until_idle();
  std::exception_ptr error;
  {
    std::lock_guard lock(error_mu_);
    std::swap(error, first_error_);
  }
  if (error) std::rethrow_exception(error);
}

template class BasicStealingPool<LaneLock>;
template class BasicStealingPool<std::mutex>;

}  // namespace concurdl::threads
