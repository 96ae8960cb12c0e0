// A bounded resource pool on a counting semaphore: N interchangeable resources (pinned
// staging buffers for host-to-GPU copies, database connections, decoder contexts) shared by
// any number of threads, at most N in use at once. The semaphore counts the free resources:
// acquire() waits while the count is zero, release() adds one and wakes a waiter. Which resource
// a thread gets is a separate, short question, answered under a mutex (a free list).
//
//   acquire():  sem.acquire()   (blocks: "is there one?")  then  lock; pop free list; unlock
//   release():  lock; push free list; unlock                 then  sem.release()
//
// The order matters: the free list is never popped empty, because the semaphore let through at
// most as many threads as there are entries. Leases are RAII: a lease returns its resource when
// it goes out of scope, also when an exception passes through.
//
// The semaphore is a mutex, a count and a condition variable (CountingSemaphore below), not
// std::counting_semaphore: libstdc++'s (GCC 12, Debian 12's) loses wake-ups. Its release() skips
// the futex wake when the count was already above zero, while an acquire() that lost its
// compare-and-swap to another thread can read 0 and go to sleep: a release then wakes nobody
// (GCC bug 98033, also 104928). This pool's stress test hung on it under ThreadSanitizer's
// scheduling (within 300 repetitions), all threads asleep with a resource free. The lesson stands:
// a wait that is not re-checked under the same lock as the signal can miss it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace concurdl::locks {

// A counting semaphore whose waits cannot miss a release: the count is read and changed only
// under the mutex, and a waiter re-checks it there after every wake-up.
class CountingSemaphore {
 public:
  explicit CountingSemaphore(std::ptrdiff_t count) : count_(count) {}
  void acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return count_ > 0; });
    --count_;
  }
  template <class Rep, class Period>
  bool try_acquire_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return count_ > 0; })) return false;
    --count_;
    return true;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      ++count_;
    }
    cv_.notify_one();  // one unit: one waiter
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::ptrdiff_t count_;
};

template <class T>
class ResourcePool {
 public:
  // The pool owns `resources`; it cannot grow or shrink afterwards.
  explicit ResourcePool(std::vector<T> resources)
      : items_(std::move(resources)), available_(static_cast<std::ptrdiff_t>(items_.size())) {
    if (items_.empty()) throw std::invalid_argument("ResourcePool: needs at least one resource");
    free_.reserve(items_.size());
    for (T& item : items_) free_.push_back(&item);
  }
  ResourcePool(const ResourcePool&) = delete;
  ResourcePool& operator=(const ResourcePool&) = delete;

  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), item_(other.item_) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (pool_) pool_->give_back(item_);
    }
    T& operator*() const { return *item_; }
    T* operator->() const { return item_; }

   private:
    friend class ResourcePool;
    Lease(ResourcePool* pool, T* item) : pool_(pool), item_(item) {}
    ResourcePool* pool_;
    T* item_;
  };

  // Blocks until a resource is free.
  Lease acquire() {
    available_.acquire();
    return Lease(this, take());
  }
  // Gives up after `timeout`: a caller that would rather skip a step than stall.
  template <class Rep, class Period>
  std::optional<Lease> try_acquire_for(std::chrono::duration<Rep, Period> timeout) {
    if (!available_.try_acquire_for(timeout)) return std::nullopt;
    return Lease(this, take());
  }

  std::size_t capacity() const { return items_.size(); }

 private:
  T* take() {
    std::lock_guard lock(mu_);
    T* item = free_.back();  // never empty: the semaphore admitted us
    free_.pop_back();
    return item;
  }
  void give_back(T* item) {
    {
      std::lock_guard lock(mu_);
      free_.push_back(item);
    }
    available_.release();  // after the push: the thread it admits finds the item there
  }

  std::vector<T> items_;
  CountingSemaphore available_;
  std::mutex mu_;
  std::vector<T*> free_;
};

}  // namespace concurdl::locks
