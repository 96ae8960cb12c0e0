// Readiness vs completion, the two models of asynchronous I/O.
//   readiness (epoll, kqueue, select): the kernel says "fd 7 can be read now"; the program then
//     does the read itself, a system call that will not block. Works for sockets and pipes,
//     not for regular files: epoll_ctl refuses one with EPERM (epoll_ctl(2)), and poll and
//     select report one always readable while its read still waits for the disk inside the
//     call. Readiness cannot make file reads asynchronous.
//   completion (io_uring, Windows IOCP): the program says "read fd 7 into this buffer"; the
//     kernel does it and reports "done, 4096 bytes". Works for files too.
// EventLoop is the smallest useful readiness loop: register a callback per descriptor, run()
// waits in epoll_wait and calls the callbacks of the ready ones. Single-threaded: callbacks run
// on the thread in run(), one at a time, so they need no locks.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <unordered_map>

#include "concurdl/async_io/file.hpp"

namespace concurdl::async_io {

class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Call on_readable(fd) whenever fd has data or its writer closed (level-triggered: again and
  // again until the data is read), until remove(fd). The callback may add and remove
  // descriptors, its own included.
  void add(int fd, std::function<void(int)> on_readable);
  void remove(int fd);
  std::size_t watched() const { return callbacks_.size(); }

  // Wait and dispatch until stop() is called or nothing is watched; returns the callbacks run.
  std::size_t run();
  // From a callback, or from any other thread (an eventfd wakes epoll_wait).
  void stop();

 private:
  UniqueFd epoll_, wake_;
  std::unordered_map<int, std::function<void(int)>> callbacks_;
  std::atomic<bool> stopping_{false};
};

// Makes fd non-blocking (O_NONBLOCK): a readiness loop must never block in a read.
void set_nonblocking(int fd);

}  // namespace concurdl::async_io
