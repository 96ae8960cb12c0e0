#include "concurdl/async_io/event_loop.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>
#include <vector>

namespace concurdl::async_io {

namespace {
[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}
}  // namespace

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl(O_NONBLOCK)");
}

EventLoop::EventLoop() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) fail("epoll_create1");
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) fail("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_.get();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0)
    fail("epoll_ctl(ADD eventfd)");
}

EventLoop::~EventLoop() = default;

void EventLoop::add(int fd, std::function<void(int)> on_readable) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl(ADD)");
  callbacks_[fd] = std::move(on_readable);
}

void EventLoop::remove(int fd) {
  if (callbacks_.erase(fd) == 0) return;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != EBADF &&
      errno != ENOENT)
    fail("epoll_ctl(DEL)");
}

void EventLoop::stop() {
  stopping_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = ::write(wake_.get(), &one, sizeof one);
}

std::size_t EventLoop::run() {
  std::size_t calls = 0;
  std::array<epoll_event, 64> events{};
  while (!stopping_ && !callbacks_.empty()) {
    const int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("epoll_wait");
    }
    for (int i = 0; i < n && !stopping_; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == wake_.get()) {
        std::uint64_t v;
        [[maybe_unused]] const ssize_t r = ::read(wake_.get(), &v, sizeof v);
        continue;
      }
      auto it = callbacks_.find(fd);
      if (it == callbacks_.end()) continue;  // removed by an earlier callback of this round
      auto cb = it->second;                  // a copy: the callback may remove itself
      cb(fd);
      ++calls;
    }
  }
  stopping_ = false;  // a stop ends this run(); a later run() starts afresh
  return calls;
}

}  // namespace concurdl::async_io
