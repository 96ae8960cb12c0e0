// For chapter tests (GoogleTest): run a check on an exercise implementation, turning the stub's
// NotImplemented into a skip that says "exercise 2.3 ticket lock not attempted".
//   TYPED_TEST(SumTest, MatchesSerial) { CDL_TRY_EXERCISE(check_sum<TypeParam>()); }
// Stubs throw on the calling thread (in a constructor or the first call), never inside a worker.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <utility>

#include "concurdl/harness/errors.hpp"

namespace concurdl::testing {

// Runs f and fails fast with a message if it does not finish within `seconds`: a hang (a lost
// wake-up, a pipe never closed, a child never reaped) must fail in seconds, not wait for CTest's
// timeout. The stuck thread cannot be joined, so the process leaves without waiting for it.
template <class F>
void within_seconds(int seconds, F&& f) {
  auto done = std::async(std::launch::async, std::forward<F>(f));
  if (done.wait_for(std::chrono::seconds(seconds)) == std::future_status::timeout) {
    std::fprintf(stderr, "FATAL: did not finish within %d s (hung?)\n", seconds);
    std::_Exit(1);
  }
  done.get();
}

}  // namespace concurdl::testing

#define CDL_TRY_EXERCISE(...)                          \
  try {                                                \
    __VA_ARGS__;                                       \
  } catch (const ::concurdl::NotImplemented& cdl_e_) { \
    GTEST_SKIP() << cdl_e_.what();                     \
  }
