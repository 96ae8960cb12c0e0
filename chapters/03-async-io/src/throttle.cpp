#include "concurdl/async_io/throttle.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <thread>

namespace concurdl::async_io {

Throttle::clock::time_point Throttle::admit(std::size_t bytes) {
  const auto now = clock::now();
  const auto latency =
      std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(model_.latency_s));
  if (model_.bandwidth_bytes_per_s <= 0) return now + latency;
  const auto transfer = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / model_.bandwidth_bytes_per_s));
  std::lock_guard lock(mu_);
  const auto start = std::max(now + latency, link_free_);
  link_free_ = start + transfer;
  return link_free_;
}

void Throttle::wait(std::size_t bytes) {
  if (!model_.active()) return;
  sleep_until_precise(admit(bytes));
}

void sleep_until_precise(Throttle::clock::time_point t) {
  thread_local const bool slack_set = [] {
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // 1 us, in ns; best effort
    return true;
  }();
  static_cast<void>(slack_set);
  std::this_thread::sleep_until(t);
}

void spin_for(double seconds) {
  if (seconds <= 0) return;
  const auto end = Throttle::clock::now() + std::chrono::duration_cast<Throttle::clock::duration>(
                                                std::chrono::duration<double>(seconds));
  while (Throttle::clock::now() < end) {
  }
}

}  // namespace concurdl::async_io
