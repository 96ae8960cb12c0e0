// The toy chapter's "reference implementation" and three "student attempts" at it.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "concurdl/core/errors.hpp"

namespace toy {

inline std::int64_t serial_sum(std::int64_t n) {
  std::int64_t s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += i;
  return s;
}

inline std::int64_t parallel_sum(std::int64_t n, int threads) {
  std::int64_t s = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : s) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) s += i;
  return s;
}

// Exercise 99.k: 1 is an untouched stub, 2 a wrong attempt (off by one), 3 a right one,
// 4 one that never returns (as a deadlocked lock would), 5 a right one that wastes 5 ms a call
// (as a lock per element would), 6 a right one whose timing needs a device this machine lacks
// (as chapter 04's do without a GPU), 7 a right one whose timing starts noisy (the timing
// decides it in a second round).
inline std::int64_t student_sum(int k, std::int64_t n) {
  if (k == 1) CDL_TODO("99.1 untouched stub");
  if (k == 5) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  while (k == 4) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::int64_t s = 0;
  for (std::int64_t i = 0; i < n + (k == 2 ? 1 : 0); ++i) s += i;
  return s;
}

}  // namespace toy
