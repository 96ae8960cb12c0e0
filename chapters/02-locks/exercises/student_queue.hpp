// Exercise 2.3 (chapter 02, exercises.md): a bounded blocking queue with condition variables.
// The contract is BoundedBlockingQueue's (include/concurdl/locks/blocking_queue.hpp), which is
// also the reference: try first, read after.
// Check it:  concurdl exercise ch02
// or faster: ch02_tests --gtest_filter='QueueEx2_3/*:BlockingQueueTyped/student*'
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include "concurdl/core/errors.hpp"

namespace concurdl::locks {

// Everything below is guarded by mu_. Two condition variables: producers wait on not_full_ for
// room, consumers on not_empty_ for an item; both also wake up when the queue is closed.
//   push(v):  wait (with a predicate!) until there is room or the queue is closed; if closed,
//             return false; else append v and wake one consumer; return true.
//   pop():    wait until there is an item or the queue is closed; if there is no item (closed and
//             drained), return std::nullopt; else take the front and wake one producer.
//   try_push / try_pop: the same without waiting (false / nullopt instead).
//   close():  mark closed and wake EVERY waiter on both condition variables.
// Think about: why must every wait re-check its condition in a loop? What happens to a consumer
// blocked in pop() when close() is called, and to items still in the queue?
template <class T>
class StudentBlockingQueue {
 public:
  explicit StudentBlockingQueue(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) throw std::invalid_argument("StudentBlockingQueue: capacity must be >= 1");
  }
  StudentBlockingQueue(const StudentBlockingQueue&) = delete;
  StudentBlockingQueue& operator=(const StudentBlockingQueue&) = delete;

  bool push([[maybe_unused]] T v) { CDL_TODO("2.3 bounded blocking queue"); }
  std::optional<T> pop() { CDL_TODO("2.3 bounded blocking queue"); }
  bool try_push([[maybe_unused]] T v) { CDL_TODO("2.3 bounded blocking queue"); }
  std::optional<T> try_pop() { CDL_TODO("2.3 bounded blocking queue"); }
  void close() { CDL_TODO("2.3 bounded blocking queue"); }

  std::size_t capacity() const { return capacity_; }

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace concurdl::locks
