// Chapter 07's exercises (exercises/exercises.md), graded by `concurdl exercise ch07 [7.1 ...]`:
// the tests first, then the student's code timed against the chapter's own in one process,
// interleaved, on the sizes the chapter's training moves. Each timing is built beside the trials
// of the chapter's parts it times (exercise_timings.hpp, component_trials.cpp):
//   7.1 pull and push      N threads pull and push the MLP's 235146 floats, 4 shards
//   7.2 the SSP wait       N workers, odd ones twice as slow, step under bound 1
//   7.3 Hogwild's update   1 and 2 threads update one shared copy of the 235146 floats
// Every trial is checked after it runs (every push in, every clock where it should be, every
// Hogwild element a count of updates): a wrong result is an invalid run, never a fast one.
#include "concurdl/harness/exercise.hpp"
#include "exercise_timings.hpp"

namespace concurdl::asgd {

namespace {

const bool registered = [] {
  register_exercise(
      {.id = "7.1",
       .chapter = "07-sync-async-training",
       .title = "parameter server pull and push with versions",
       .test_binary = "ch07_tests",
       .test_filter = "PushPullEx7_1/student.*",
       .timing = exercise_timings::parameter_server(),
       .questions = {
           "Your server took {student} for the pulls and pushes against ParameterServer's "
           "{reference} at {configuration} on {machine}: a cost of {cost} (95% interval "
           "{cost_ci}). Divide by the pushes: how many microseconds per pull and push, and how "
           "many bytes does each move? Then time a server with one lock held across a whole "
           "pull or push (or, if that is yours, one with a lock per shard): which is faster on "
           "{machine} at {threads} threads, and why? Say what shards let two threads do at once, "
           "and what the two cores then share.",
           "Run `concurdl train --mode ps-async --ranks 2 --epochs 1` and again with --ranks 4, "
           "and quote staleness_mean, staleness_p99 and staleness_max from each run's records "
           "(results.json or its report). Why is the mean staleness about N - 1 with N workers "
           "that take about as "
           "long per step? What does a gradient computed on parameters that are s updates old "
           "do to SGD, and what do asynchronous systems do about it?",
           "push() counts itself in the version only once its whole update is in. What would "
           "pull's returned version promise that the copy does not hold if push counted itself "
           "first, and which test would catch it? With several shards, a pull may return a copy "
           "that the server never held at any one moment: why does the reference allow it, and "
           "why does SGD not mind?"}});

  register_exercise(
      {.id = "7.2",
       .chapter = "07-sync-async-training",
       .title = "the SSP wait condition",
       .test_binary = "ch07_tests",
       .test_filter = "BoundedWaitEx7_2/student.*",
       .timing = exercise_timings::ssp_clock(),
       .questions = {
           "Your clock took {student} against SspClock's {reference} for {configuration} "
           "({cost}, 95% interval {cost_ci}). How many times per step does a worker of yours "
           "take a lock, and how many threads does each advance() wake? Why does the reference "
           "notify_all rather than notify_one (who may be waiting for one worker's advance)?",
           "What SSP's bound trades: run `concurdl train --mode ps-ssp --ranks 2 --epochs 2 "
           "--straggler 1:4` with --staleness 0 and with --staleness 4, and the same with --mode "
           "ps-async; quote samples/s, ssp_waits, staleness_max and the test accuracy after each "
           "epoch. Explain the three with what the fast worker does while the straggler computes, "
           "and say what bound on any gradient's staleness a bound s gives with N workers.",
           "Why must wait_turn re-check its condition in a loop around the wait (or pass a "
           "predicate), and why must the check and the sleep happen under the same mutex that "
           "advance() and leave() take? Describe the lost wake-up that follows if advance() "
           "increments the clock without the lock, and why leave() must wake the waiters too."}});

  register_exercise(
      {.id = "7.3",
       .chapter = "07-sync-async-training",
       .title = "Hogwild's lock-free update",
       .test_binary = "ch07_tests",
       .test_filter = "LockFreeStepEx7_3/student.*",
       .timing = exercise_timings::hogwild(),
       .questions = {
           "Your step took {student} against hogwild_step's {reference} at {configuration} "
           "({cost}, 95% interval {cost_ci}). Each step moves 20 bytes per parameter: what "
           "bandwidth is that at 1 thread, against {machine}'s calibrated memory bandwidth? Look "
           "at both loops in `objdump -d --no-show-raw-insn` (or perf annotate): is either "
           "vectorised, and why can a compiler not vectorise relaxed atomic loads and stores "
           "the way it does plain ones?",
           "An aligned float load or store is never torn on x86, so what does "
           "std::atomic_ref<float> with memory_order_relaxed change? Say what the C++ memory "
           "model calls two threads accessing one plain float, one of them writing, what a "
           "compiler may then do to the loop, and what ThreadSanitizer reports. What would "
           "seq_cst stores cost on x86, what would they buy, and would they give what Niu et "
           "al.'s analysis of Hogwild assumes (each coordinate's update atomic)?",
           "Run `ch07_tests --gtest_filter='LockFreeStepEx7_3/student.*' "
           "--gtest_output=json:hw.json` and quote the lost_updates_2threads, _4threads and "
           "_8threads properties (of T x 200 updates of 2048 elements each). Why does "
           "load, compute, store lose an update when two threads interleave, why would a "
           "fetch_add per element still not make the step with momentum exact, and why does "
           "Hogwild's argument (sparse updates rarely collide) not hold for a dense MLP?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::asgd
