// Scheduling policies: which waiting job runs next. The same decision an OS makes for threads, a
// serving system for inference requests, a data loader for prefetch jobs, and an executor for
// tasks. Run: concurdl run ch02/scheduling_sim ch02/executor_policies.
//
// Part 1, a simulation on one CPU over a job trace (arrival, burst, priority), in integer ticks:
//   fcfs            first come, first served: simple, and short jobs wait behind long ones
//                   (the convoy effect)
//   sjf             shortest job first (non-preemptive): provably the least average waiting time
//                   among non-preemptive policies, if bursts are known; long jobs may starve
//   priority        lowest priority number first (non-preemptive): urgent jobs are served
//                   fast, and a low-priority job can wait for ever while urgent ones keep coming
//   priority_aging  the same, but a job's effective priority improves by one every `aging`
//                   ticks it waits: no job starves
//   round_robin     run each ready job for at most `quantum` ticks, then to the back of the
//                   queue: good response time, more switches, higher average turnaround
// Per job: turnaround = finish - arrival; waiting = turnaround - burst.
// Conventions (they decide ties, and the tests compute by hand with them): ties go to the
// earlier arrival, then the lower id. In round robin, jobs that arrive at time t join the queue
// before a job whose quantum expires at t.
//
// Part 2, the real thing: PriorityExecutor, worker threads popping the most urgent task from a
// priority queue under a mutex. With priority = arrival order it is FCFS; with priority = task
// length it is SJF; the executor experiment shows the same ordering of average waiting times as
// the simulation.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "concurdl/core/variants.hpp"

namespace concurdl::locks {

struct Job {
  int id;
  std::int64_t arrival;
  std::int64_t burst;  // > 0
  int priority;        // smaller = more urgent (as Unix nice values)
};

struct JobTimes {
  int id;
  std::int64_t first_start;  // when it first got the CPU (response time = first_start - arrival)
  std::int64_t finish;
  std::int64_t waiting;
  std::int64_t turnaround;
};

struct ScheduleResult {
  std::vector<JobTimes> jobs;  // in id order
  std::vector<int> order;      // the job given the CPU at each dispatch, in time order
  double avg_waiting = 0;
  double avg_turnaround = 0;
};

ScheduleResult simulate_fcfs(const std::vector<Job>& trace);
ScheduleResult simulate_sjf(const std::vector<Job>& trace);
// aging: ticks of waiting per one step of priority improvement (>= 1).
ScheduleResult simulate_priority_aging(const std::vector<Job>& trace, std::int64_t aging);
ScheduleResult simulate_round_robin(const std::vector<Job>& trace, std::int64_t quantum);

// A deterministic trace of n jobs: exponential inter-arrival gaps (mean `mean_gap` ticks),
// bursts mostly short (1..8) with one in five long (20..80), priorities 0..4. A job needs 13.6
// ticks on average, so with mean_gap 17 the CPU is busy about 80% of the time: queues form and
// the policies differ (at mean_gap < 13.6 the queue grows without bound).
std::vector<Job> random_trace(int n, double mean_gap, std::uint64_t seed);

struct SchedulingPolicy : VariantInfo {
  ScheduleResult (*simulate)(const std::vector<Job>& trace);
};

// The table the experiment and the tests iterate over: fcfs, sjf, priority (no aging, for
// comparison), priority_aging (20 ticks per step) and round_robin (quantum 4).
const VariantTable<SchedulingPolicy>& scheduling_policies();

// --- the executor -------------------------------------------------------------------------------

// Worker threads run submitted tasks, most urgent first: smallest priority value, ties in
// submission order. One mutex and one condition variable guard a std::priority_queue.
// The destructor runs every task already submitted, then joins the workers. A task must not
// throw (it runs on a worker thread with nobody to catch it: std::terminate).
class PriorityExecutor {
 public:
  explicit PriorityExecutor(unsigned workers);
  ~PriorityExecutor();
  PriorityExecutor(const PriorityExecutor&) = delete;
  PriorityExecutor& operator=(const PriorityExecutor&) = delete;

  void submit(std::int64_t priority, std::function<void()> task);
  void wait_idle();  // until every submitted task has finished
  unsigned size() const { return static_cast<unsigned>(workers_.size()); }

 private:
  struct Entry {
    std::int64_t priority;
    std::uint64_t seq;  // submission order: the tie-break that keeps equal priorities FIFO
    std::function<void()> task;
  };
  struct Later {  // std::priority_queue pops the "largest": make the most urgent the largest
    bool operator()(const Entry& a, const Entry& b) const {
      return a.priority != b.priority ? a.priority > b.priority : a.seq > b.seq;
    }
  };
  void worker_loop();

  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  std::priority_queue<Entry, std::vector<Entry>, Later> queue_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t pending_ = 0;  // queued + running
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace concurdl::locks
