// Scheduling policies (scheduling.hpp), simulated and real:
//   ch02/scheduling_sim       FCFS, SJF, priority (without and with aging) and round robin over
//                             one random trace of jobs on one simulated CPU: average waiting
//                             (all jobs, and the most urgent ones), average turnaround and the
//                             worst waiting time, in ticks. Deterministic: the "measurement" is
//                             the simulation's result, the same every time
//   ch02/executor_policies    the PriorityExecutor running a burst of short and long tasks
//                             (all queued before any runs) with priority = submission order
//                             (FCFS) or = task length (SJF): measured average waiting time, which
//                             orders the two as the simulation does
//   concurdl run ch02/scheduling_sim ch02/executor_policies
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "concurdl/locks/scheduling.hpp"
#include "experiments_common.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::locks;
using namespace concurdl::locks::experiments;

// --- the simulation ----------------------------------------------------------------------------

// The statistics of the "stat" axis. avg_waiting_urgent: the jobs of priority 0 only (what a
// priority scheduler is for); max_waiting: the worst job (what starvation looks like).
double statistic(const ScheduleResult& r, const std::vector<Job>& trace, const std::string& stat) {
  if (stat == "avg_waiting") return r.avg_waiting;
  if (stat == "avg_waiting_urgent") {
    double sum = 0;
    int n = 0;
    for (std::size_t i = 0; i < r.jobs.size() && i < trace.size(); ++i)
      if (trace[i].priority == 0) {
        sum += static_cast<double>(r.jobs[i].waiting);
        ++n;
      }
    return n ? sum / n : 0.0;
  }
  if (stat == "avg_turnaround") return r.avg_turnaround;
  if (stat == "max_waiting") {
    std::int64_t m = 0;
    for (const JobTimes& j : r.jobs) m = std::max(m, j.waiting);
    return static_cast<double>(m);
  }
  throw UsageError(fmt::format(
      "parameter 'stat': '{}' is not avg_waiting, avg_waiting_urgent, avg_turnaround or "
      "max_waiting",
      stat));
}

Trial simulation_trial(const Params& p, GroupCache& cache) {
  const SchedulingPolicy& policy = scheduling_policies().find(p);
  const int jobs = static_cast<int>(param_int(p, "jobs"));
  const std::string stat = param_str(p, "stat");
  statistic(ScheduleResult{}, {}, stat);  // rejects an unknown statistic before anything runs
  // Mean gap 17 ticks: the CPU is about 80% busy (scheduling.hpp, random_trace).
  const std::vector<Job>& trace =
      cache.get<std::vector<Job>>("trace", [jobs] { return random_trace(jobs, 17.0, 2024); });
  auto last = std::make_shared<ScheduleResult>();
  Trial t;
  t.measure = [&trace, last, simulate = policy.simulate, stat] {
    *last = simulate(trace);
    return statistic(*last, trace, stat);
  };
  // Every job finished exactly once, and no job finished before it arrived and ran its burst.
  t.check = [&trace, last]() -> std::string {
    if (last->jobs.size() != trace.size())
      return fmt::format("{} jobs finished of {}", last->jobs.size(), trace.size());
    for (std::size_t i = 0; i < trace.size(); ++i) {
      const JobTimes& j = last->jobs[i];
      if (j.id != trace[i].id) return fmt::format("job {} missing", trace[i].id);
      if (j.waiting < 0 || j.turnaround < trace[i].burst)
        return fmt::format("job {}: waiting {} turnaround {} for burst {}", j.id, j.waiting,
                           j.turnaround, trace[i].burst);
    }
    return "";
  };
  return t;
}

// --- the executor ------------------------------------------------------------------------------

struct ExecutorPolicy : VariantInfo {
  bool by_length;  // priority = task length (SJF); otherwise submission order (FCFS)
};
const ExecutorPolicy kExecutorRows[] = {
    {{"fcfs", "priority = submission order: the executor is a FIFO queue"}, false},
    {{"sjf", "priority = task length: short tasks first"}, true},
};
const VariantTable kExecutorPolicies{kExecutorRows};

// Every fifth task is long (200 us of work), the others short (20 us).
constexpr double kShortNs = 20'000, kLongNs = 200'000;
bool is_long(std::size_t i) { return i % 5 == 4; }

struct ExecutorRun {
  std::vector<std::atomic<int>> ran;
  std::vector<double> start_s;  // when task i started, seconds after the release
  std::vector<std::size_t> order;
  std::mutex order_mu;
  explicit ExecutorRun(std::size_t n) : ran(n), start_s(n, 0.0) {}
};

Trial executor_trial(const Params& p, GroupCache&) {
  const ExecutorPolicy& policy = kExecutorPolicies.find(p);
  const auto workers = static_cast<unsigned>(param_int(p, "workers"));
  const auto tasks = static_cast<std::size_t>(param_int(p, "tasks"));
  const std::uint32_t short_steps = cs_steps_for(kShortNs), long_steps = cs_steps_for(kLongNs);
  auto executor = std::make_shared<PriorityExecutor>(workers);
  auto run = std::make_shared<std::unique_ptr<ExecutorRun>>();
  const bool by_length = policy.by_length;
  Trial t;
  t.reset = [run, tasks] { *run = std::make_unique<ExecutorRun>(tasks); };
  t.measure = [=] {
    ExecutorRun& r = **run;
    // Hold every worker on a gate (the most urgent tasks of all), queue the burst behind it,
    // then open the gate: all tasks "arrive" at once, and the policy alone decides the order.
    std::latch gate(1);
    for (unsigned w = 0; w < workers; ++w)
      executor->submit(std::numeric_limits<std::int64_t>::min(), [&gate] { gate.wait(); });
    // Written before the gate opens; the latch orders it before every task that reads it.
    std::chrono::steady_clock::time_point release;
    for (std::size_t i = 0; i < tasks; ++i) {
      const std::uint32_t steps = is_long(i) ? long_steps : short_steps;
      const auto priority = static_cast<std::int64_t>(by_length ? steps : i);
      executor->submit(priority, [&r, &release, i, steps] {
        r.start_s[i] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - release).count();
        {
          std::lock_guard lock(r.order_mu);
          r.order.push_back(i);
        }
        std::uint64_t x = i + 1;
        x = cs_work(x, steps);
        r.ran[i].fetch_add(x == 0 ? 2 : 1);  // x is never 0; the use keeps the work
      });
    }
    release = std::chrono::steady_clock::now();
    gate.count_down();
    executor->wait_idle();
    double sum = 0;
    for (double s : r.start_s) sum += s;
    return sum / static_cast<double>(tasks);
  };
  t.check = [run, tasks, workers, by_length]() -> std::string {
    const ExecutorRun& r = **run;
    for (std::size_t i = 0; i < tasks; ++i)
      if (r.ran[i].load() != 1) return fmt::format("task {} ran {} times", i, r.ran[i].load());
    if (workers == 1) {
      // One worker: the order must be exactly the policy's (SJF: all short, then all long).
      for (std::size_t k = 1; k < r.order.size(); ++k) {
        const std::size_t a = r.order[k - 1], b = r.order[k];
        const bool ok =
            by_length ? (is_long(a) <= is_long(b)) && (is_long(a) != is_long(b) || a < b) : a < b;
        if (!ok) return fmt::format("task {} ran before task {}", a, b);
      }
    }
    return "";
  };
  return t;
}

const bool registered = [] {
  register_experiment({
      .id = "ch02/scheduling_sim",
      .chapter = "02-locks",
      .title = "Scheduling policies simulated on one CPU: waiting and turnaround times (ticks)",
      .axes = {scheduling_policies().axis("ch02/scheduling_sim"),
               {"stat", {"avg_waiting", "avg_waiting_urgent", "avg_turnaround", "max_waiting"}},
               // A simulation, one job at a time: a million jobs take seconds per policy.
               {"jobs", {"2000"}, {"500"}, AxisKind::count, 1'000'000}},
      .metric = "sim_time",
      .unit = "ticks",
      .interleave = {"variant", "stat"},
      .repetitions = 1,
      .prepare = simulation_trial,
      .figures = {{.id = "averages",
                   .title = "Scheduling policies (simulated): waiting and turnaround",
                   .kind = FigureKind::bars,
                   .x = "variant",
                   .series = "stat",
                   .log_y = true,
                   .y_label = "ticks (log)"}},
  });

  register_experiment({
      .id = "ch02/executor_policies",
      .chapter = "02-locks",
      .title = "PriorityExecutor: average waiting time of a burst of short and long tasks, "
               "FCFS vs SJF priorities",
      .axes = {kExecutorPolicies.axis("ch02/executor_policies"),
               {"workers", {"1", exercise_threads()}, {}, AxisKind::count, kMaxThreads},
               // 20 or 200 us of work each: 100000 tasks keep one worker busy for seconds.
               {"tasks", {"1000"}, {"200"}, AxisKind::count, 100'000}},
      .baseline = {{"variant", "fcfs"}},
      .metric = "avg_wait",
      .unit = "s",
      .interleave = {"variant", "workers"},
      .prepare = executor_trial,
      .figures = {{.id = "wait",
                   .title = "Executor: average wait from release to start, FCFS vs SJF",
                   .kind = FigureKind::bars,
                   .x = "workers",
                   .y_label = "seconds"}},
  });
  return true;
}();

}  // namespace
