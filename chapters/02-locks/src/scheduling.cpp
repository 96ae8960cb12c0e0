// Scheduling policies simulated on one CPU, and the priority executor
// (include/concurdl/locks/scheduling.hpp explains the policies and the tie-breaking rules).
#include "concurdl/locks/scheduling.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <utility>

namespace concurdl::locks {

namespace {

void check_trace(const std::vector<Job>& trace) {
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (trace[i].burst <= 0) throw std::invalid_argument("job burst must be > 0");
    if (trace[i].arrival < 0) throw std::invalid_argument("job arrival must be >= 0");
  }
}

// Sorts by (arrival, id): the order in which jobs enter the system.
std::vector<Job> by_arrival(std::vector<Job> trace) {
  std::stable_sort(trace.begin(), trace.end(), [](const Job& a, const Job& b) {
    return a.arrival != b.arrival ? a.arrival < b.arrival : a.id < b.id;
  });
  return trace;
}

ScheduleResult finish_result(const std::vector<Job>& trace, std::vector<JobTimes> times,
                             std::vector<int> order) {
  ScheduleResult r;
  std::sort(times.begin(), times.end(),
            [](const JobTimes& a, const JobTimes& b) { return a.id < b.id; });
  double w = 0, t = 0;
  for (JobTimes& j : times) {
    const auto job =
        std::find_if(trace.begin(), trace.end(), [&](const Job& x) { return x.id == j.id; });
    j.turnaround = j.finish - job->arrival;
    j.waiting = j.turnaround - job->burst;
    w += static_cast<double>(j.waiting);
    t += static_cast<double>(j.turnaround);
  }
  const double n = times.empty() ? 1.0 : static_cast<double>(times.size());
  r.avg_waiting = w / n;
  r.avg_turnaround = t / n;
  r.jobs = std::move(times);
  r.order = std::move(order);
  return r;
}

// Non-preemptive: whenever the CPU is free, `pick` chooses among the jobs that have arrived
// (the index into `ready`); if none has, the CPU idles until the next arrival.
template <class Pick>
ScheduleResult non_preemptive(const std::vector<Job>& trace, Pick pick) {
  check_trace(trace);
  const std::vector<Job> jobs = by_arrival(trace);
  std::vector<Job> ready;
  std::vector<JobTimes> times;
  std::vector<int> order;
  std::size_t next = 0;
  std::int64_t now = 0;
  while (next < jobs.size() || !ready.empty()) {
    if (ready.empty() && jobs[next].arrival > now) now = jobs[next].arrival;
    while (next < jobs.size() && jobs[next].arrival <= now) ready.push_back(jobs[next++]);
    const std::size_t k = pick(ready, now);
    const Job job = ready[k];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(k));
    order.push_back(job.id);
    times.push_back({job.id, now, now + job.burst, 0, 0});
    now += job.burst;
  }
  return finish_result(trace, std::move(times), std::move(order));
}

// The ready job with the smallest key; ties to the earlier arrival, then the lower id.
template <class Key>
std::size_t argmin(const std::vector<Job>& ready, Key key) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < ready.size(); ++i) {
    const auto a = key(ready[i]), b = key(ready[best]);
    if (a < b ||
        (a == b && (ready[i].arrival < ready[best].arrival ||
                    (ready[i].arrival == ready[best].arrival && ready[i].id < ready[best].id))))
      best = i;
  }
  return best;
}

}  // namespace

ScheduleResult simulate_fcfs(const std::vector<Job>& trace) {
  return non_preemptive(trace, [](const std::vector<Job>& ready, std::int64_t) {
    return argmin(ready, [](const Job&) { return 0; });  // all equal: earliest arrival wins
  });
}

ScheduleResult simulate_sjf(const std::vector<Job>& trace) {
  return non_preemptive(trace, [](const std::vector<Job>& ready, std::int64_t) {
    return argmin(ready, [](const Job& j) { return j.burst; });
  });
}

ScheduleResult simulate_priority_aging(const std::vector<Job>& trace, std::int64_t aging) {
  if (aging < 1) throw std::invalid_argument("aging must be >= 1 tick");
  return non_preemptive(trace, [aging](const std::vector<Job>& ready, std::int64_t now) {
    // Effective priority: the base priority, one step better per `aging` ticks of waiting.
    return argmin(ready, [aging, now](const Job& j) {
      return static_cast<std::int64_t>(j.priority) - (now - j.arrival) / aging;
    });
  });
}

ScheduleResult simulate_round_robin(const std::vector<Job>& trace, std::int64_t quantum) {
  if (quantum < 1) throw std::invalid_argument("quantum must be >= 1 tick");
  check_trace(trace);
  const std::vector<Job> jobs = by_arrival(trace);
  struct Running {
    Job job;
    std::int64_t left;
    std::int64_t first_start = -1;
  };
  std::deque<Running> ready;
  std::vector<JobTimes> times;
  std::vector<int> order;
  std::size_t next = 0;
  std::int64_t now = 0;
  auto admit_until = [&](std::int64_t t) {
    while (next < jobs.size() && jobs[next].arrival <= t) {
      ready.push_back({jobs[next], jobs[next].burst});
      ++next;
    }
  };
  while (next < jobs.size() || !ready.empty()) {
    if (ready.empty()) now = std::max(now, jobs[next].arrival);
    admit_until(now);
    Running r = ready.front();
    ready.pop_front();
    if (r.first_start < 0) r.first_start = now;
    order.push_back(r.job.id);
    const std::int64_t slice = std::min(quantum, r.left);
    now += slice;
    r.left -= slice;
    admit_until(now);  // arrivals during the slice (and at its end) queue before the preempted
    if (r.left > 0)
      ready.push_back(r);
    else
      times.push_back({r.job.id, r.first_start, now, 0, 0});
  }
  return finish_result(trace, std::move(times), std::move(order));
}

std::vector<Job> random_trace(int n, double mean_gap, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&s] {  // splitmix64: deterministic on every platform (std:: distributions are not)
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto uniform = [&next] { return static_cast<double>(next() >> 11) * 0x1p-53; };
  std::vector<Job> trace;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += -mean_gap * std::log(1.0 - uniform());
    const bool long_job = next() % 5 == 0;
    const std::int64_t burst = long_job ? 20 + static_cast<std::int64_t>(next() % 61)
                                        : 1 + static_cast<std::int64_t>(next() % 8);
    trace.push_back({i + 1, static_cast<std::int64_t>(t), burst, static_cast<int>(next() % 5)});
  }
  return trace;
}

namespace {
ScheduleResult priority_only(const std::vector<Job>& t) {
  return simulate_priority_aging(t, std::numeric_limits<std::int64_t>::max());
}
ScheduleResult priority_aging_20(const std::vector<Job>& t) {
  return simulate_priority_aging(t, 20);
}
ScheduleResult round_robin_4(const std::vector<Job>& t) { return simulate_round_robin(t, 4); }
}  // namespace

const VariantTable<SchedulingPolicy>& scheduling_policies() {
  static constexpr SchedulingPolicy rows[] = {
      {{"fcfs", "first come, first served: short jobs wait behind long ones (convoy effect)"},
       &simulate_fcfs},
      {{"sjf", "shortest job first, non-preemptive: least average waiting, long jobs can starve"},
       &simulate_sjf},
      {{"priority",
        "most urgent first, non-preemptive, no aging: urgent jobs are served fast and "
        "the least urgent can wait without bound"},
       &priority_only},
      {{"priority_aging",
        "priority, but every 20 ticks of waiting improve a job's priority by one: no starvation"},
       &priority_aging_20},
      {{"round_robin", "4-tick time slices in turn: quick first response, no convoys"},
       &round_robin_4},
  };
  static constexpr VariantTable table{rows};
  return table;
}

// --- PriorityExecutor ---------------------------------------------------------------------------

PriorityExecutor::PriorityExecutor(unsigned workers) {
  if (workers == 0) throw std::invalid_argument("PriorityExecutor: need at least one worker");
  workers_.reserve(workers);
  try {
    for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (...) {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    for (auto& w : workers_) w.join();
    throw;
  }
}

PriorityExecutor::~PriorityExecutor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& w : workers_) w.join();
}

void PriorityExecutor::submit(std::int64_t priority, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw std::runtime_error("PriorityExecutor: submit after shutdown");
    queue_.push({priority, next_seq_++, std::move(task)});
    ++pending_;
  }
  work_ready_.notify_one();
}

void PriorityExecutor::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return pending_ == 0; });
}

void PriorityExecutor::worker_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    // top() is const: the task is copied out (a std::function copy) before pop().
    std::function<void()> task = queue_.top().task;
    queue_.pop();
    lock.unlock();
    task();
    task = nullptr;
    lock.lock();
    if (--pending_ == 0) idle_.notify_all();
  }
}

}  // namespace concurdl::locks
