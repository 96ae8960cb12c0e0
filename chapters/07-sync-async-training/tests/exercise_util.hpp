// What chapter 07's exercise tests share (test_exercises.cpp, test_exercise_ssp.cpp): the
// deadline and thread counts, a little data and busy work, a team of threads whose exceptions
// reach the test, and the instance names that let `Suite/student.*` select a student's tests.
#pragma once

#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/testing.hpp"

namespace ch07_exercises {

// Every test takes well under a second here; sanitizer builds are about 10x slower.
inline constexpr int kDeadline = 30;
inline constexpr int kThreadCounts[] = {1, 2, 4, 8};

inline std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 101) - 1.0f;
  return v;
}

inline void spin(int iterations) {
  volatile double x = 0;
  for (int k = 0; k < iterations; ++k) x = x + 1.0;
}

using concurdl::testing::finishes_within;  // a hang is a failed test, not a stuck program

// Runs body(t) for t = 0 .. threads-1, each on a thread of its own, and joins them. The first
// exception any of them threw is rethrown here (a stub's NotImplemented becomes a skip, an
// unexpected exception a failure) instead of ending the program.
template <class Body>
void run_team(int threads, Body body) {
  std::mutex m;
  std::exception_ptr first;
  {
    std::vector<std::jthread> team;
    for (int t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        try {
          body(t);
        } catch (...) {
          std::lock_guard lock(m);
          if (!first) first = std::current_exception();
        }
      });
  }
  if (first) std::rethrow_exception(first);
}

// The instances are named "reference" and "student", so that `Suite/student.*` selects the
// student's tests alone: every suite's type list is the reference's type, then the student's.
struct ImplNames {
  template <class T>
  static std::string GetName(int i) {
    return i == 0 ? "reference" : "student";
  }
};

}  // namespace ch07_exercises
