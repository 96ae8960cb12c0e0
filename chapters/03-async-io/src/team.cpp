#include "concurdl/async_io/team.hpp"

#include <stdexcept>

namespace concurdl::async_io {

Team::Team(unsigned n) : n_(n) {
  if (n == 0) throw std::invalid_argument("Team: need at least one member");
  threads_.reserve(n - 1);
  try {
    for (unsigned t = 1; t < n; ++t) threads_.emplace_back([this, t] { member(t); });
  } catch (...) {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    start_.notify_all();
    for (auto& th : threads_) th.join();
    throw;
  }
}

Team::~Team() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& th : threads_) th.join();
}

void Team::member(unsigned t) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mu_);
  while (true) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const auto* fn = fn_;
    lock.unlock();
    std::exception_ptr err;
    try {
      (*fn)(t);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    if (--running_ == 0) done_.notify_all();
  }
}

void Team::run(const std::function<void(unsigned)>& fn) {
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    error_ = nullptr;
    running_ = n_ - 1;
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return running_ == 0; });
  fn_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace concurdl::async_io
