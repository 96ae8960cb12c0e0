// Exercise 3.3: ordered delivery from N workers (chapter 03, exercises.md).
//
// N worker threads assemble batches 0, 1, 2, ... in parallel and finish them in any order; the
// training loop must still get them in order (reproducible runs). StudentReorderBuffer sits
// between them with the channel interface of include/concurdl/async_io/channel.hpp:
//   bool put(index, item)   a worker hands in batch `index`; blocks while index >= next + window
//                           (memory stays bounded); returns false once closed
//   optional<T> take()      the consumer gets batch `next` (blocking until it is there), then
//                           next + 1, ...; nullopt once closed, or after finish() when every
//                           batch has been taken; rethrows the exception given to fail()
//   finish()                the workers are done: no more puts
//   fail(e)                 a worker failed: take() rethrows e
//   close()                 the consumer stops: every blocked put and take returns at once
// WorkerLoader<StudentReorderBuffer<Batch>> (include/concurdl/async_io/loaders.hpp) uses it
// exactly as it uses the reference ReorderBuffer. Think about: why can the worker holding batch
// `next` never be blocked by the window, and why does that rule out a deadlock?
// Check it:   concurdl exercise ch03
// or faster:  ch03_tests --gtest_filter='ReorderTyped/student.*:LoaderTyped/student_ordered.*'
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>

#include "concurdl/core/errors.hpp"

namespace concurdl::async_io {

template <class T>
class StudentReorderBuffer {
 public:
  explicit StudentReorderBuffer(std::size_t window) : window_(window) {
    CDL_TODO("3.3 ordered delivery (reorder buffer)");
  }

  bool put([[maybe_unused]] std::uint64_t index, [[maybe_unused]] T item) { return false; }
  std::optional<T> take() { return std::nullopt; }
  void finish() {}
  void fail([[maybe_unused]] std::exception_ptr e) {}
  void close() {}

 private:
  // One way to hold the state; change it if you like.
  [[maybe_unused]] const std::size_t window_;
  std::mutex mu_;
  std::condition_variable space_;  // puts wait here for the window to move
  std::condition_variable ready_;  // take waits here for item `next_`
  std::map<std::uint64_t, T> waiting_;
  std::uint64_t next_ = 0;
  bool finished_ = false, closed_ = false;
  std::exception_ptr error_;
};

}  // namespace concurdl::async_io
