// A fixed team of threads for fork-join calls: run(fn) calls fn(0) .. fn(n-1) on n threads (the
// caller is member 0) and returns when all have finished. The threads are started once, so a
// call costs a wake-up, not a thread creation (chapter 01). Used to give blocking reads (pread,
// page faults through mmap) a queue depth: n threads, each with one request in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace concurdl::async_io {

class Team {
 public:
  explicit Team(unsigned n);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  unsigned size() const { return n_; }
  // Runs fn(t) for every member t, waits for all, rethrows the first exception.
  void run(const std::function<void(unsigned)>& fn);

 private:
  void member(unsigned t);

  unsigned n_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(unsigned)>* fn_ = nullptr;
  std::uint64_t generation_ = 0;
  unsigned running_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace concurdl::async_io
