// A bounded blocking multi-producer multi-consumer queue: a std::deque under one mutex and two
// condition variables. It is the channel of message passing (a data loader's workers hand
// batches to the training loop through exactly this), and the reference of exercise 2.3.
//
//   push(v):  wait until (size < capacity or closed);  closed -> false;  else enqueue, notify
//             a consumer
//   pop():    wait until (not empty or closed);  empty (so closed) -> nullopt;  else dequeue,
//             notify a producer
//   close():  no more pushes; consumers drain what is left, then get nullopt: that is how a
//             consumer learns that the stream is over, without a sentinel value
//
// Why condition variables wait in a loop (the predicate form of wait): a waiter can wake up
// without a notify (a spurious wake-up) and, even when notified, another thread may have taken
// the item first. The predicate is re-checked under the mutex every time.
// Why notify after unlocking: the woken thread would otherwise wake up only to block on the
// mutex its waker still holds. (Notifying under the lock is also correct, just slower.)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace concurdl::locks {

template <class T>
class BoundedBlockingQueue {
 public:
  explicit BoundedBlockingQueue(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) throw std::invalid_argument("BoundedBlockingQueue: capacity must be >= 1");
  }
  BoundedBlockingQueue(const BoundedBlockingQueue&) = delete;
  BoundedBlockingQueue& operator=(const BoundedBlockingQueue&) = delete;

  // Blocks while full. Returns false (and drops v) if the queue is closed.
  bool push(T v) {
    {
      std::unique_lock lock(mu_);
      not_full_.wait(lock, [this] { return items_.size() < capacity_ || closed_; });
      if (closed_) return false;
      items_.push_back(std::move(v));
    }
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty and open. nullopt means closed and drained: the stream has ended.
  std::optional<T> pop() {
    std::optional<T> v;
    {
      std::unique_lock lock(mu_);
      not_empty_.wait(lock, [this] { return !items_.empty() || closed_; });
      if (items_.empty()) return std::nullopt;
      v.emplace(std::move(items_.front()));
      items_.pop_front();
    }
    not_full_.notify_one();
    return v;
  }

  bool try_push(T v) {
    {
      std::lock_guard lock(mu_);
      if (closed_ || items_.size() >= capacity_) return false;
      items_.push_back(std::move(v));
    }
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> try_pop() {
    std::optional<T> v;
    {
      std::lock_guard lock(mu_);
      if (items_.empty()) return std::nullopt;
      v.emplace(std::move(items_.front()));
      items_.pop_front();
    }
    not_full_.notify_one();
    return v;
  }

  // Idempotent. Wakes every waiter: blocked producers return false, consumers drain and end.
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  std::size_t capacity() const { return capacity_; }

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_;   // a slot was freed, or the queue closed
  std::condition_variable not_empty_;  // an item arrived, or the queue closed
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace concurdl::locks
