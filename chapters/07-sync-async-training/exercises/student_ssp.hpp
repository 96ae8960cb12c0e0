// Exercise 7.2 (chapter 07, exercises.md): stale-synchronous parallel's wait condition.
// The reference is SspClock in include/concurdl/asgd/parameter_server.hpp and
// src/parameter_server.cpp: try first, read after.
// Check it:  concurdl exercise ch07 7.2     (tests, then a timing against the reference)
// or faster: ch07_tests --gtest_filter='BoundedWaitEx7_2/student.*'
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "concurdl/core/errors.hpp"

namespace concurdl::asgd {

// Exercise 7.2: the clock that keeps SSP's workers within `bound` clocks (finished steps) of
// each other (Ho et al., 2013). Each worker w has a clock: the steps it has finished. Before
// each step the worker calls wait_turn(w), which must block while
//     clock[w] > (the smallest clock among the workers still active) + bound
// and the worker calls advance(w) when the step is done. bound 0 is lockstep (every worker
// finishes step c before any starts step c + 1, though each push is still applied on its own,
// unlike synchronous SGD's summed step); a bound larger than any run's steps never waits (as
// fully asynchronous SGD). The bound is in clocks, not in pushes: a gradient's staleness (the
// other workers' pushes between its pull and its push) can exceed it.
// Every method may be called from any number of threads at once.
//
//   constructor     `workers` >= 1 (std::invalid_argument otherwise): every clock 0, all active
//   wait_turn(w)    blocks (sleeps: no spinning) until worker w may start its next step, and
//                   returns its lead at that moment: clock[w] - the smallest active clock,
//                   which is <= bound, always. Counts the calls that had to block.
//   advance(w)      worker w finished a step: clock[w] + 1
//   leave(w)        worker w takes no more steps: from now on it holds nobody back
//   clock(w)        worker w's clock; bound(): the bound
//   max_lead()      the largest lead any wait_turn returned; waits(): the calls that blocked
// Think about: what a blocked worker waits for, and which calls must wake it (advance? leave?
// both?); which workers can be woken by one advance (one, or several?); what happens when the
// slowest worker advances between a waiter's check and its sleep.
class StudentSspClock {
 public:
  StudentSspClock([[maybe_unused]] int workers, [[maybe_unused]] std::uint64_t bound) {
    CDL_TODO("7.2 SSP wait");
  }

  std::uint64_t wait_turn([[maybe_unused]] int w) { CDL_TODO("7.2 SSP wait"); }
  void advance([[maybe_unused]] int w) { CDL_TODO("7.2 SSP wait"); }
  void leave([[maybe_unused]] int w) { CDL_TODO("7.2 SSP wait"); }
  std::uint64_t bound() const { CDL_TODO("7.2 SSP wait"); }
  std::uint64_t clock([[maybe_unused]] int w) const { CDL_TODO("7.2 SSP wait"); }
  std::uint64_t max_lead() const { CDL_TODO("7.2 SSP wait"); }
  std::uint64_t waits() const { CDL_TODO("7.2 SSP wait"); }

 private:
  // Yours: the clocks, who is still active, the counters, and what guards and signals them.
};

}  // namespace concurdl::asgd
