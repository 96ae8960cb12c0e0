// Deadlock and livelock, each run next to its fix (hazards.hpp):
//   ch02/hazards   time until each demonstration ends: the deadlock when the watchdog has found
//                  the cycle and aborted it, the livelock when its round cap is reached, the
//                  fixes when their work is done. Each check asserts the outcome the lesson
//                  promises (deadlock detected with a cycle; fix finished; money conserved;
//                  livelock made no progress; randomised backoff did).
// The timing of exercise 2.4 (exercises/student_transfer.hpp) is built here (exercises.cpp).
//   concurdl run ch02/hazards
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/locks/hazards.hpp"
#include "exercises/student_transfer.hpp"
#include "experiments_common.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::locks;
using namespace concurdl::locks::experiments;

using namespace std::chrono_literals;

std::string check_transfers(const TransferOutcome& o, bool expect_deadlock) {
  if (o.total_after != o.total_before)
    return fmt::format("money not conserved: {} before, {} after", o.total_before, o.total_after);
  if (expect_deadlock) {
    if (!o.deadlock_detected) return "the naive transfers did not deadlock (or were not caught)";
    if (!o.cycle_found) return "a stall was detected but no cycle was found: " + o.report;
    return "";
  }
  if (o.deadlock_detected) return "the fixed transfers were reported stuck: " + o.report;
  if (!o.finished) return fmt::format("only {} transfers were made", o.transfers_done);
  return "";
}

// A demonstration runs once (timed by the harness) and returns "" when its outcome is the one
// the lesson promises, else what went differently.
std::string deadlock_demo(TransferFn fn, bool expect_deadlock, unsigned threads) {
  TransferOptions o;
  o.threads = threads;
  o.transfers_per_thread = 200;
  o.timeout = 100ms;
  o.window = 50us;
  const TransferOutcome r = run_transfers(fn, o);
  return check_transfers(r, expect_deadlock);
}

std::string livelock_demo(RetryPolicy policy, unsigned /*threads: always a polite pair*/) {
  const LivelockOutcome r = run_polite_workers(policy, 200, 2000);
  if (policy == RetryPolicy::immediate && (!r.gave_up || r.successes != 0))
    return "the polite workers made progress: " + r.report;
  if (policy == RetryPolicy::randomised && r.gave_up)
    return "randomised backoff did not make progress: " + r.report;
  return "";
}

struct HazardDemo : VariantInfo {
  std::string (*run)(unsigned threads);
};

const HazardDemo kHazardRows[] = {
    {{"deadlock_naive",
      "lock source then destination, both directions: the watchdog reports the cycle"},
     [](unsigned t) { return deadlock_demo(&transfer_naive, true, t); }},
    {{"deadlock_scoped_lock", "std::scoped_lock takes both at once: finishes"},
     [](unsigned t) { return deadlock_demo(&transfer_ordered, false, t); }},
    {{"livelock_polite",
      "try the second lock, release and retry in lockstep: 2000 rounds, no progress"},
     [](unsigned t) { return livelock_demo(RetryPolicy::immediate, t); }},
    {{"livelock_randomised", "random, doubling sit-outs after a failure: 200 successes"},
     [](unsigned t) { return livelock_demo(RetryPolicy::randomised, t); }},
};
const VariantTable kHazardDemos{kHazardRows};

Trial hazard_trial(const Params& p, GroupCache&) {
  const HazardDemo& d = kHazardDemos.find(p);
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  auto wrong = std::make_shared<std::string>();
  Trial t;
  t.run = [wrong, run = d.run, threads] { *wrong = run(threads); };
  t.check = [wrong] { return *wrong; };
  return t;
}

Trial transfer_exercise_trial(Impl impl, const Params& p, GroupCache&) {
  const TransferFn fn = impl == Impl::student ? &student_transfer : &transfer_ordered;
  TransferOptions o;
  o.threads = static_cast<unsigned>(param_int(p, "threads"));
  o.transfers_per_thread = static_cast<std::uint64_t>(param_int(p, "transfers"));
  o.timeout = 1000ms;
  o.window = 0us;
  auto last = std::make_shared<TransferOutcome>();
  Trial t;
  t.run = [=] { *last = run_transfers(fn, o); };
  t.check = [last] { return check_transfers(*last, false); };
  t.work = {.items = static_cast<double>(o.threads) * static_cast<double>(o.transfers_per_thread)};
  return t;
}

const bool registered = [] {
  register_experiment({
      .id = "ch02/hazards",
      .chapter = "02-locks",
      .title = "Deadlock (caught by a watchdog) and livelock (bounded), each next to its fix",
      // The deadlock demonstrations run `threads` transfer threads (pairs in opposite
      // directions; one thread alone cannot deadlock, and its record says so); the livelock is
      // always a pair of polite threads.
      .axes = {kHazardDemos.axis("ch02/hazards"),
               {"threads", {"2"}, {}, AxisKind::count, kMaxThreads}},
      .repetitions = 3,
      .prepare = hazard_trial,
      .figures = {{.id = "time",
                   .title = "Hazard demonstrations: time until detected (or capped) vs fixed",
                   .kind = FigureKind::bars,
                   .x = "variant",
                   .series = "threads",
                   .log_y = true,
                   .y_label = "seconds (log)"}},
      // A record is valid only when the demonstration ended the way the lesson says (the
      // deadlock detected with its cycle named, the fix finished with the money conserved), so
      // these claims are about that outcome and how soon it came.
      .claims = {{.id = "deadlock_detected",
                  // Law: the record is valid only when the watchdog found the deadlock and named
                  // its wait-for cycle. The time follows from the demonstration's bounds: at most
                  // three tries, each ended by the watchdog 100 ms after the threads last made
                  // progress (back-to-back transfers close the cycle within microseconds), 0.3 s,
                  // plus each try's start and join; 0.5 s leaves 0.2 s for those. A time, so a
                  // record taken while the machine was busy or short of cores is not judged.
                  .statement = "The watchdog detects the deadlock, names the wait-for cycle and "
                               "ends the demonstration within 0.5 s (timeout 100 ms)",
                  .select = {{"variant", "deadlock_naive"}},
                  .compare = Claim::Compare::at_most,
                  .bound = 0.5,
                  .unit = "s"},
                 {.id = "scoped_lock_finishes",
                  // A magnitude: an absolute time; that the fix finishes at all is the record's
                  // validation.
                  .statement =
                      "How long the std::scoped_lock fix takes to finish all its transfers at 2 "
                      "threads (the watchdog calls 100 ms a deadlock)",
                  .select = {{"variant", "deadlock_scoped_lock"}, {"threads", "2"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
                  .unit = "s"}},
  });

  return true;
}();

}  // namespace

// The timed halves of exercises built here (exercise_timings.hpp).
namespace concurdl::locks::exercise_timings {

Experiment transfers() {
  return exercise_timing(
      {.title = "deadlock-free transfers, student vs std::scoped_lock",
       // per thread, a lock pair each: 2^30 take minutes
       .axes = {{"transfers", {"20000"}, {"5000"}, AxisKind::count, std::int64_t{1} << 30}},
       .prepare = transfer_exercise_trial});
}

}  // namespace concurdl::locks::exercise_timings
