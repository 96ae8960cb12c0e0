// What the ZeRO trainer (zero.hpp, src/zero.cpp) stands on: its counted buffers, ZeRO's model of
// memory and traffic, and the communication queue.
#include <fmt/format.h>

#include <utility>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/zero.hpp"

namespace concurdl::dp {

void CountedBuffer::allocate(std::size_t floats) {
  release();
  data_.assign(floats, 0.0f);
}

void CountedBuffer::release() { kernels::release(data_); }

ZeroModel zero_model(std::size_t psi, int ranks, int stage) {
  const double p = static_cast<double>(psi) * sizeof(float);
  const double n = ranks;
  ZeroModel m;
  m.parameters = stage >= 3 ? p / n : p;
  m.gradients = stage >= 2 ? p / n : p;
  m.optimizer = stage >= 1 ? p / n : p;
  m.sent_per_step = (stage >= 3 ? 3.0 : 2.0) * p * (n - 1) / n;
  return m;
}

// --- CommQueue --------------------------------------------------------------------------------

CommQueue::CommQueue(bool own_thread, std::string track)
    : threaded_(own_thread), track_(std::move(track)) {
  if (threaded_) thread_ = std::thread([this] { worker(); });
}

CommQueue::~CommQueue() {
  if (!threaded_) return;
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

CommQueue::Ticket CommQueue::submit(std::function<void()> job) {
  if (!threaded_) {
    if (error_) std::rethrow_exception(error_);
    try {
      job();
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
    return ++submitted_;
  }
  Ticket t = 0;
  {
    std::lock_guard lock(m_);
    if (error_) std::rethrow_exception(error_);
    jobs_.push_back(std::move(job));
    t = ++submitted_;
  }
  cv_.notify_all();
  return t;
}

void CommQueue::wait(Ticket t) {
  if (!threaded_) {
    if (error_) std::rethrow_exception(error_);
    return;
  }
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return done_ >= t || error_ != nullptr; });
  if (error_) std::rethrow_exception(error_);
}

void CommQueue::wait_all() { wait(submitted_); }

void CommQueue::worker() {
  trace::set_track(track_);
  std::unique_lock lock(m_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    try {
      job();
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      cv_.notify_all();
      return;  // the communicator's state is unknown: no further collectives
    }
    lock.lock();
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace concurdl::dp
