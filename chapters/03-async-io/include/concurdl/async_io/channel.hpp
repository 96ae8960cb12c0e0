// The two channels between a loader's producers and its consumer, with one interface so a
// loader can take either (WorkerLoader<Channel>):
//   BoundedQueue   first come, first delivered (unordered); at most `capacity` items wait
//   ReorderBuffer  delivered in index order 0, 1, 2, ... whatever order they arrive in; an
//                  item more than `window` ahead of the next one to deliver waits to be put
//
//   bool put(index, item)  producer; blocks while full; false once the channel is closed
//   optional<T> take()     consumer; blocks until an item is due; nullopt at the end (after
//                          finish()) or once closed; rethrows a producer's exception (fail())
//   void finish()          producers: no more items will come
//   void fail(error)       producers: this exception goes to the consumer instead of items
//   void close()           consumer: stop; wakes every blocked put and take
// Both bound memory: a fast producer waits instead of filling RAM (backpressure).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace concurdl::async_io {

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) throw std::invalid_argument("BoundedQueue: capacity must be >= 1");
  }

  bool put(std::uint64_t /*index*/, T item) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    lock.unlock();
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> take() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || error_ || finished_ || !items_.empty(); });
    if (closed_) return std::nullopt;
    if (error_) std::rethrow_exception(error_);
    if (items_.empty()) return std::nullopt;  // finished and drained
    T item = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    not_full_.notify_one();
    return item;
  }

  void finish() {
    set([&] { finished_ = true; });
  }
  void fail(std::exception_ptr e) {
    set([&] {
      if (!error_) error_ = std::move(e);
    });
  }
  void close() {
    set([&] { closed_ = true; });
  }

 private:
  template <class F>
  void set(F f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  const std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool finished_ = false, closed_ = false;
  std::exception_ptr error_;
};

template <class T>
class ReorderBuffer {
 public:
  explicit ReorderBuffer(std::size_t window) : window_(window) {
    if (window == 0) throw std::invalid_argument("ReorderBuffer: window must be >= 1");
  }

  // Never blocks the producer of index next_ (next_ < next_ + window), so the item the consumer
  // waits for can always be put: no deadlock, whatever order the producers finish in.
  bool put(std::uint64_t index, T item) {
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return closed_ || index < next_ + window_; });
    if (closed_) return false;
    waiting_.emplace(index, std::move(item));
    const bool due = index == next_;
    lock.unlock();
    if (due) ready_.notify_one();
    return true;
  }

  std::optional<T> take() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] {
      return closed_ || error_ || finished_ ||
             (!waiting_.empty() && waiting_.begin()->first == next_);
    });
    if (closed_) return std::nullopt;
    if (error_) std::rethrow_exception(error_);
    auto it = waiting_.begin();
    if (it == waiting_.end() || it->first != next_) {
      if (waiting_.empty()) return std::nullopt;  // finished: everything delivered
      throw std::logic_error("ReorderBuffer: finished with item " + std::to_string(next_) +
                             " missing");
    }
    T item = std::move(it->second);
    waiting_.erase(it);
    ++next_;
    lock.unlock();
    space_.notify_all();  // the window moved: producers further ahead may put now
    return item;
  }

  void finish() {
    set([&] { finished_ = true; });
  }
  void fail(std::exception_ptr e) {
    set([&] {
      if (!error_) error_ = std::move(e);
    });
  }
  void close() {
    set([&] { closed_ = true; });
  }

 private:
  template <class F>
  void set(F f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    space_.notify_all();
    ready_.notify_all();
  }

  const std::size_t window_;
  std::mutex mu_;
  std::condition_variable space_, ready_;
  std::map<std::uint64_t, T> waiting_;  // arrived, not yet delivered, by index
  std::uint64_t next_ = 0;              // the index the consumer gets next
  bool finished_ = false, closed_ = false;
  std::exception_ptr error_;
};

}  // namespace concurdl::async_io
