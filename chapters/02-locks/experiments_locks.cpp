// The locks of spinlocks.hpp (lock_variants.hpp's table) and the RW locks of rw_lock.hpp, under
// contention:
//   ch02/lock_throughput  acquisitions/s vs threads, for an empty, a 100 ns and a 1 us critical
//                         section. Pure spinlocks collapse past the core count (the holder, or
//                         the next in line, is descheduled while the others spin). The same runs
//                         give each lock's fairness: Jain's index of the acquisitions per thread
//                         (1 = equal shares), a metric of every sample
//   ch02/rw_lock          std::mutex, std::shared_mutex and our writer-preferring lock at 50,
//                         90 and 99% reads
// Each run lasts a fixed time (duration_ms) rather than a fixed number of acquisitions, so an
// oversubscribed spinlock stays bounded in time. Each run checks mutual exclusion: a plain
// counter incremented under the lock must equal the acquisitions counted.
// The timings of exercises 2.1 and 2.2 (exercises/student_locks.hpp) are built here
// (exercises.cpp).
//   concurdl run ch02/lock_throughput ch02/rw_lock
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "concurdl/locks/rw_lock.hpp"
#include "exercises/student_locks.hpp"
#include "experiments_common.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::locks;
using namespace concurdl::locks::experiments;

using ContendFn = ContentionResult (*)(unsigned, std::uint32_t, std::chrono::nanoseconds);

std::string check_contention(const ContentionResult& r, unsigned threads) {
  if (r.per_thread.size() != threads)
    return fmt::format("{} per-thread counts for {} threads", r.per_thread.size(), threads);
  if (r.total() == 0) return "no thread acquired the lock";
  if (r.protected_count != r.total())
    return fmt::format(
        "the plain counter under the lock is {}, but {} acquisitions were made: "
        "two threads were inside at once",
        r.protected_count, r.total());
  return "";
}

// One fixed-duration run of `contend`: acquisitions/s, and Jain's index of the acquisitions per
// thread from the same run.
Trial contention_trial(ContendFn contend, const Params& p) {
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  const std::uint32_t steps = cs_steps_of(p);
  const auto duration = duration_of(p);
  auto last = std::make_shared<ContentionResult>();
  Trial t;
  t.measure = [=] {
    *last = contend(threads, steps, duration);
    return Sample{static_cast<double>(last->total()) / last->seconds,
                  {{"jain_index", jain_index(last->per_thread)}}};
  };
  t.check = [last, threads] { return check_contention(*last, threads); };
  return t;
}

const Metric kJainIndex{"jain_index", "", false,
                        "Jain's index of acquisitions per thread: 1 = equal shares, 1/n = one "
                        "thread gets all"};

Trial throughput_trial(const Params& p, GroupCache&) {
  return contention_trial(kLockVariants.find(p).contend, p);
}

Trial rw_trial(const Params& p, GroupCache&) {
  const RwVariant& v = kRwVariants.find(p);
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  const std::int64_t pct = param_int(p, "read_pct");  // 0 .. 100 (the axis's limits)
  const std::uint32_t steps = cs_steps_of(p);
  const auto duration = duration_of(p);
  auto last = std::make_shared<RwResult>();
  Trial t;
  t.measure = [=, contend = v.contend] {
    *last = contend(threads, static_cast<unsigned>(pct * 10), steps, duration);
    return static_cast<double>(last->reads + last->writes) / last->seconds;
  };
  t.check = [last]() -> std::string {
    if (last->reads + last->writes == 0) return "no operation completed";
    if (last->torn_reads != 0)
      return fmt::format("{} reads saw a half-written table: a writer was not exclusive",
                         last->torn_reads);
    if (!last->cells_equal || last->final_value != last->writes)
      return fmt::format("the table ends at {} after {} writes: writes were lost",
                         last->final_value, last->writes);
    return "";
  };
  return t;
}

std::vector<Figure> throughput_figures() {
  std::vector<Figure> figs;
  for (const CriticalSection& cs : kCriticalSections)
    figs.push_back(
        {.id = fmt::format("cs_{}", cs.name),
         .title = fmt::format("Lock acquisitions/s vs threads, {} critical section", cs.name),
         .kind = FigureKind::lines,
         .where = {{"cs", std::string(cs.name)}},
         .log_y = true,
         .y_label = "acquisitions/s (log)"});
  figs.push_back({.id = "vs_mutex",
                  .title = "Lock throughput relative to std::mutex, 100ns critical section",
                  .kind = FigureKind::bars,
                  .y = "speedup",
                  .where = {{"cs", "100ns"}},
                  .log_y = true,
                  .y_label = "throughput / std::mutex's (log)"});
  // Fairness from the same runs. At one thread the index is 1 by definition.
  for (const char* cs : {"empty", "1us"})
    figs.push_back({.id = fmt::format("fairness_{}", cs),
                    .title = fmt::format("Jain's fairness index per lock, {} critical section",
                                         std::string_view(cs) == "1us" ? "1 us" : cs),
                    .kind = FigureKind::bars,
                    .y = "jain_index",
                    .where = {{"cs", cs}},
                    .y_label = "Jain's index (1 = fair)"});
  return figs;
}

// Exercise timings: student against reference, fixed duration, 100 ns critical sections.
template <class Reference, class Student>
Experiment lock_exercise_timing(const std::string& title) {
  return exercise_timing(
      {.title = title,
       .axes = {{"cs", {"100ns"}},
                {"duration_ms", {"100"}, {"50"}, AxisKind::count, kMaxDurationMs}},
       .metric = "acquisitions_per_s",
       .unit = "1/s",
       .lower_is_better = false,
       .metrics = {kJainIndex},
       // Spinlock throughput at threads == cores swings with whatever else the machine runs (a
       // descheduled next-in-line stalls a ticket lock): more repetitions narrow the interval.
       .repetitions = 10,
       .prepare = [](Impl impl, const Params& p, GroupCache&) {
         return contention_trial(impl == Impl::student ? &contend<Student> : &contend<Reference>,
                                 p);
       }});
}

std::vector<Claim> lock_throughput_claims() {
  return {
      {.id = "tas_beats_mutex",
       // A magnitude: a futex wake-up against a spinning waiter's cache-line transfer: both
       // the machine's (1.17-1.51x on the committed 2-vCPU guests).
       .statement = "While every thread has a core (2 threads), how many times as fast the "
                    "test-and-set spinlock passes a 1 us critical section around as "
                    "std::mutex, which puts its waiters to sleep",
       .select = {{"variant", "v1_tas"}, {"threads", "2"}, {"cs", "1us"}},
       .versus = {{"variant", "std_mutex"}},
       .kind = Claim::Kind::magnitude,
       .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
       .unit = "×",
       .min_cpus = 2},
      {.id = "ticket_is_fair",
       // Law by the algorithm: tickets are served in arrival order, so while both threads
       // contend each takes every other turn and their counts differ by at most one. Jain's
       // index of counts a and a(1 - d) is about 1 - d^2/4: 0.999 allows the counts to
       // differ by 6%, a thread away from the queue for 6% of the run (a stretch without its
       // core, which the cores probe flags and the law then does not judge).
       // Positive control: test-and-set, in the same run, shows the index can see
       // unfairness (its releasing thread may take the lock straight back); where TAS too
       // came out fair, the measurement could not have told, and the law is not judged.
       .statement = "The ticket lock serves in arrival order: at 2 threads with a 1 us "
                    "critical section its Jain fairness index is at least 0.999",
       .select = {{"variant", "v4_ticket"}, {"threads", "2"}, {"cs", "1us"}},
       .field = "jain_index",
       .bound = 0.999,
       .min_cpus = 2,
       .control = Claim::Control{.select = {{"variant", "v1_tas"}, {"threads", "2"}, {"cs", "1us"}},
                                 .field = "jain_index",
                                 .compare = Claim::Compare::at_most,
                                 .bound = 0.99,
                                 .shows = "test-and-set's index is below 0.99: the index "
                                          "sees an unfair lock"}},
      {.id = "ticket_fairer_than_tas",
       // A magnitude: the ticket lock's own fairness is the law ticket_is_fair; how unfair TAS
       // is depends on which core wins the line back (1.03x on real cores, up to 2x on vCPUs).
       .statement =
           "At 2 threads with a 1 us critical section, the ticket lock's Jain fairness index "
           "over test-and-set's, whose releasing thread may re-take the lock",
       .select = {{"variant", "v4_ticket"}, {"threads", "2"}, {"cs", "1us"}},
       .field = "jain_index",
       .versus = {{"variant", "v1_tas"}},
       .kind = Claim::Kind::magnitude,
       .causes = {ClaimCause::cores_and_smt, ClaimCause::caches},
       .unit = "×",
       .min_cpus = 2}};
}

Experiment lock_throughput_experiment() {
  return {
      .id = "ch02/lock_throughput",
      .chapter = "02-locks",
      .title =
          "Lock throughput and fairness: acquisitions/s and Jain's index vs threads for "
          "three critical-section lengths",
      .axes = {kLockVariants.axis("ch02/lock_throughput"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"cs", cs_names()},
               // Longer than a scheduler time slice or two, so that the fairness index measures
               // the lock, not the scheduler.
               {"duration_ms", {"200"}, {"50"}, AxisKind::count, kMaxDurationMs}},
      // "speedup" = this lock's throughput / std::mutex's at the same threads and cs.
      .baseline = {{"variant", "std_mutex"}},
      .metric = "acquisitions_per_s",
      .unit = "1/s",
      .lower_is_better = false,
      .metrics = {kJainIndex},
      .prepare = throughput_trial,
      .figures = throughput_figures(),
      .claims = lock_throughput_claims(),
  };
}

std::vector<Figure> rw_figures() {
  std::vector<Figure> figs;
  for (const char* pct : {"50", "90", "99"})
    figs.push_back({.id = fmt::format("reads_{}", pct),
                    .title = fmt::format("RW locks, {}% reads: operations/s vs threads", pct),
                    .kind = FigureKind::lines,
                    .where = {{"read_pct", pct}},
                    .y_label = "operations/s"});
  return figs;
}

Experiment rw_lock_experiment() {
  return {
      .id = "ch02/rw_lock",
      .chapter = "02-locks",
      .title = "Readers-writer locks vs std::mutex at 50, 90 and 99% reads",
      .axes = {kRwVariants.axis("ch02/rw_lock"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {.name = "read_pct",
                .values = {"50", "90", "99"},
                .kind = AxisKind::integer,
                .max = 100,
                .min = 0},
               {"cs", {"100ns", "1us"}, {"1us"}},
               {"duration_ms", {"100"}, {"20"}, AxisKind::count, kMaxDurationMs}},
      .baseline = {{"variant", "std_mutex"}},
      .metric = "ops_per_s",
      .unit = "1/s",
      .lower_is_better = false,
      .prepare = rw_trial,
      .figures = rw_figures(),
  };
}

const bool registered = [] {
  register_experiment(lock_throughput_experiment());
  register_experiment(rw_lock_experiment());
  return true;
}();

}  // namespace

// The timed halves of exercises built here (exercise_timings.hpp).
namespace concurdl::locks::exercise_timings {

Experiment ttas_backoff() {
  return lock_exercise_timing<TtasBackoffLock, StudentTtasBackoffLock>(
      "TTAS + backoff, student vs v3_ttas_backoff");
}

Experiment ticket() {
  return lock_exercise_timing<TicketLock, StudentTicketLock>("ticket lock, student vs v4_ticket");
}

}  // namespace concurdl::locks::exercise_timings
