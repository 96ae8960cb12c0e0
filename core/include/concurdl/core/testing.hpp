// For chapter tests (GoogleTest): run a check on an exercise implementation, turning the stub's
// NotImplemented into a skip that says "exercise 2.3 ticket lock not attempted".
//   TYPED_TEST(SumTest, MatchesSerial) { CDL_TRY_EXERCISE(check_sum<TypeParam>()); }
// Stubs throw on the calling thread (in a constructor or the first call), never inside a worker.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/sanitizers.hpp"

namespace concurdl::testing {

// Whether this build runs under ThreadSanitizer (sanitizers.hpp).
using ::concurdl::kThreadSanitizer;

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

// Runs `scenario` on a thread of its own and waits at most `seconds` for it: a hang (ranks
// waiting for each other, a lost wake-up) is a failed assertion that says so, and the tests
// after it still run and report (within_seconds ends the program instead, and `concurdl
// exercise` would then get no report to grade). The stuck thread is left behind, so the
// scenario must own everything it touches: capture by value. A stub's NotImplemented is thrown
// again here, on the test's thread, so that CDL_TRY_EXERCISE makes it a skip; any other
// exception is a failure naming it. Only the exception's text crosses threads, never the
// exception object: its reference count lives in libstdc++, out of ThreadSanitizer's sight.
template <class Scenario>
[[nodiscard]] ::testing::AssertionResult finishes_within(int seconds, Scenario scenario) {
  struct Outcome {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, not_implemented = false, failed = false;
    std::string what;
  };
  auto out = std::make_shared<Outcome>();
  std::thread worker([out, scenario = std::move(scenario)]() mutable {
    bool not_implemented = false, failed = false;
    std::string what;
    try {
      scenario();
    } catch (const ::concurdl::NotImplemented& e) {
      not_implemented = true;
      what = e.exercise();
    } catch (const std::exception& e) {
      failed = true;
      what = e.what();
    } catch (...) {
      failed = true;
      what = "an exception that is not a std::exception";
    }
    {
      std::lock_guard lock(out->m);
      out->done = true;
      out->not_implemented = not_implemented;
      out->failed = failed;
      out->what = std::move(what);
    }
    out->cv.notify_all();
  });
  {
    std::unique_lock lock(out->m);
    if (!out->cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return out->done; })) {
      worker.detach();
      return ::testing::AssertionFailure()
             << "did not finish within " << seconds
             << " s: a deadlock or a lost wake-up (its thread is left behind)";
    }
  }
  // Finished: joined, so that what the thread keeps per thread (GoogleTest's trace stack, set
  // by an assertion in the scenario) is freed before the test ends, not found by LeakSanitizer.
  worker.join();
  if (out->not_implemented) throw ::concurdl::NotImplemented(out->what);
  if (out->failed) return ::testing::AssertionFailure() << "threw: " << out->what;
  return ::testing::AssertionSuccess();
}

}  // namespace concurdl::testing

#define CDL_TRY_EXERCISE(...)                          \
  try {                                                \
    __VA_ARGS__;                                       \
  } catch (const ::concurdl::NotImplemented& cdl_e_) { \
    GTEST_SKIP() << cdl_e_.what();                     \
  }
