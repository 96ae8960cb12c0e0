// Scheduling policies (scheduling.hpp): each simulated policy against a small trace worked out by
// hand (the numbers below are in the lesson), properties on a random trace, and the real
// PriorityExecutor: with one worker, tasks run in priority order (ties in submission order); with
// 1, 2, 4 and 8 workers every task runs exactly once.
//   ch02_tests --gtest_filter='Scheduling*:PriorityExecutor*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/locks/scheduling.hpp"

namespace {

using namespace concurdl::locks;
using concurdl::testing::within_seconds;

// id, arrival, burst, priority (smaller = more urgent)
const std::vector<Job> kTrace = {
    {1, 0, 6, 2}, {2, 1, 3, 5}, {3, 2, 4, 1}, {4, 3, 2, 3}, {5, 8, 3, 1},
};

struct Expected {
  std::vector<int> order;
  std::vector<std::int64_t> finish;  // by id
  double avg_waiting, avg_turnaround;
};

void expect_schedule(const ScheduleResult& r, const Expected& e) {
  EXPECT_EQ(r.order, e.order);
  ASSERT_EQ(r.jobs.size(), e.finish.size());
  for (std::size_t i = 0; i < e.finish.size(); ++i) {
    EXPECT_EQ(r.jobs[i].id, static_cast<int>(i + 1));
    EXPECT_EQ(r.jobs[i].finish, e.finish[i]) << "job " << i + 1;
  }
  EXPECT_DOUBLE_EQ(r.avg_waiting, e.avg_waiting);
  EXPECT_DOUBLE_EQ(r.avg_turnaround, e.avg_turnaround);
}

// FCFS: J1 0-6, J2 6-9, J3 9-13, J4 13-15, J5 15-18.
// waiting 0+5+7+10+7 = 29 -> 5.8; turnaround 6+8+11+12+10 = 47 -> 9.4
TEST(SchedulingSim, FcfsByHand) {
  expect_schedule(simulate_fcfs(kTrace), {{1, 2, 3, 4, 5}, {6, 9, 13, 15, 18}, 5.8, 9.4});
}

// SJF: J1 0-6; at 6 {J2:3, J3:4, J4:2} -> J4 6-8; at 8 {J2:3, J3:4, J5:3} -> J2 (tie, earlier)
// 8-11; J5 11-14; J3 14-18. waiting 0+7+12+3+3 = 25 -> 5.0; turnaround 6+10+16+5+6 = 43 -> 8.6
TEST(SchedulingSim, SjfByHand) {
  expect_schedule(simulate_sjf(kTrace), {{1, 4, 2, 5, 3}, {6, 11, 18, 8, 14}, 5.0, 8.6});
}

// Priority, aging too slow to matter: J1 0-6; J3 (1) 6-10; J5 (1) 10-13; J4 (3) 13-15; J2 (5)
// 15-18. waiting 0+14+4+10+2 = 30 -> 6.0; turnaround 6+17+8+12+5 = 48 -> 9.6
TEST(SchedulingSim, PriorityWithoutAgingByHand) {
  expect_schedule(simulate_priority_aging(kTrace, 1000),
                  {{1, 3, 5, 4, 2}, {6, 18, 10, 15, 13}, 6.0, 9.6});
}

// Aging every 2 ticks: at 6, J3 (1 - 4/2 = -1) beats J4 (3 - 3/2 = 2) and J2 (5 - 5/2 = 3);
// at 10, J4 (3 - 7/2 = 0) ties J5 (1 - 2/2 = 0) and arrived first; at 12, J5 (-1) beats J2 (0).
// waiting 0+14+4+7+4 = 29 -> 5.8; turnaround 6+17+8+9+7 = 47 -> 9.4
TEST(SchedulingSim, PriorityAgingEveryTwoTicksByHand) {
  expect_schedule(simulate_priority_aging(kTrace, 2),
                  {{1, 3, 4, 5, 2}, {6, 18, 10, 12, 15}, 5.8, 9.4});
}

// Aging every tick: the low-priority J2 (5) has waited 9 ticks by t=10 (5 - 9 = -4) and ties J4
// (3 - 7 = -4), arriving first: aging lifted it past J4 and J5. waiting 0+9+4+10+7 = 30 -> 6.0;
// turnaround 6+12+8+12+10 = 48 -> 9.6
TEST(SchedulingSim, PriorityAgingEveryTickLetsTheLowPriorityJobIn) {
  expect_schedule(simulate_priority_aging(kTrace, 1),
                  {{1, 3, 2, 4, 5}, {6, 13, 10, 15, 18}, 6.0, 9.6});
}

// Round robin, quantum 2 (arrivals at t queue before the job preempted at t):
// J1 0-2, J2 2-4, J3 4-6, J1 6-8, J4 8-10 (done), J2 10-11 (done), J3 11-13 (done),
// J5 13-15, J1 15-17 (done), J5 17-18 (done).
// waiting 11+7+7+5+7 = 37 -> 7.4; turnaround 17+10+11+7+10 = 55 -> 11.0
TEST(SchedulingSim, RoundRobinByHand) {
  const ScheduleResult r = simulate_round_robin(kTrace, 2);
  expect_schedule(r, {{1, 2, 3, 1, 4, 2, 3, 5, 1, 5}, {17, 11, 13, 10, 18}, 7.4, 11.0});
  // Response time, round robin's strength: every job starts within a few ticks of arriving.
  const std::int64_t first_start[] = {0, 2, 4, 8, 13};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(r.jobs[i].first_start, first_start[i]);
}

TEST(SchedulingSim, IdleGapsAndOneJob) {
  const std::vector<Job> gaps = {{1, 5, 2, 0}, {2, 20, 1, 0}};
  for (const SchedulingPolicy& p : scheduling_policies()) {
    const ScheduleResult r = p.simulate(gaps);
    ASSERT_EQ(r.jobs.size(), 2u) << p.name;
    EXPECT_EQ(r.jobs[0].finish, 7) << p.name;
    EXPECT_EQ(r.jobs[1].finish, 21) << p.name;
    EXPECT_DOUBLE_EQ(r.avg_waiting, 0.0) << p.name;
  }
  EXPECT_TRUE(simulate_fcfs({}).jobs.empty());
  EXPECT_THROW(simulate_fcfs({{1, 0, 0, 0}}), std::invalid_argument);
  EXPECT_THROW(simulate_round_robin(kTrace, 0), std::invalid_argument);
}

// On a long random trace (CPU about 80% busy): SJF waits least on average and worst at the tail,
// every policy runs every job's whole burst, and aging bounds the worst wait that pure priority
// allows.
TEST(SchedulingSim, RandomTraceProperties) {
  const std::vector<Job> trace = random_trace(2000, 17.0, 7);
  const ScheduleResult fcfs = simulate_fcfs(trace), sjf = simulate_sjf(trace);
  EXPECT_LT(sjf.avg_waiting, fcfs.avg_waiting);
  std::int64_t total_burst = 0;
  for (const Job& j : trace) total_burst += j.burst;
  for (const SchedulingPolicy& p : scheduling_policies()) {
    const ScheduleResult r = p.simulate(trace);
    EXPECT_EQ(r.jobs.size(), trace.size()) << p.name;
    std::int64_t ran = 0;
    for (std::size_t i = 0; i < r.jobs.size(); ++i) ran += r.jobs[i].turnaround - r.jobs[i].waiting;
    EXPECT_EQ(ran, total_burst) << p.name;
  }
  auto worst = [](const ScheduleResult& r) {
    std::int64_t m = 0;
    for (const JobTimes& j : r.jobs) m = std::max(m, j.waiting);
    return m;
  };
  const ScheduleResult priority = scheduling_policies().find("priority").simulate(trace);
  const ScheduleResult aging = scheduling_policies().find("priority_aging").simulate(trace);
  EXPECT_LT(worst(aging), worst(priority)) << "aging must bound the worst wait";
  EXPECT_GT(worst(sjf), worst(fcfs)) << "SJF starves long jobs: its worst wait exceeds FCFS's";
}

TEST(SchedulingSim, TableIsNamedAndDistinct) {
  std::set<std::string_view> names;
  for (const SchedulingPolicy& p : scheduling_policies()) {
    EXPECT_TRUE(names.insert(p.name).second);
    EXPECT_EQ(scheduling_policies().lookup(p.name), &p);
  }
  EXPECT_EQ(scheduling_policies().lookup("lottery"), nullptr);
}

// --- the executor ------------------------------------------------------------------------------

TEST(PriorityExecutor, OneWorkerRunsTasksInPriorityOrder) {
  within_seconds(60, [] {
    PriorityExecutor ex(1);
    std::latch gate(1);
    ex.submit(std::numeric_limits<std::int64_t>::min(),
              [&gate] { gate.wait(); });  // hold the worker
    std::mutex mu;
    std::vector<int> order;
    const std::int64_t priorities[] = {5, 1, 3, 1, 0, 5};
    for (int i = 0; i < 6; ++i)
      ex.submit(priorities[i], [&, i] {
        std::lock_guard lock(mu);
        order.push_back(i);
      });
    gate.count_down();
    ex.wait_idle();
    // Most urgent first; equal priorities (1 and 1, 5 and 5) in submission order.
    EXPECT_EQ(order, (std::vector<int>{4, 1, 3, 2, 0, 5}));
  });
}

TEST(PriorityExecutor, EveryTaskRunsOnceAtAnyWorkerCount) {
  within_seconds(60, [] {
    for (unsigned workers : {1u, 2u, 4u, 8u}) {
      constexpr int kTasks = 5000;
      std::vector<std::atomic<int>> hits(kTasks);
      {
        PriorityExecutor ex(workers);
        EXPECT_EQ(ex.size(), workers);
        for (int i = 0; i < kTasks; ++i)
          ex.submit(i % 7, [&hits, i] { hits[static_cast<std::size_t>(i)].fetch_add(1); });
        ex.wait_idle();
        int wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        EXPECT_EQ(wrong, 0) << workers << " workers";
        // Tasks queued when the executor is destroyed still run.
        for (int i = 0; i < kTasks; ++i)
          ex.submit(0, [&hits, i] { hits[static_cast<std::size_t>(i)].fetch_add(1); });
      }
      int not_two = 0;
      for (auto& h : hits) not_two += h.load() != 2;
      EXPECT_EQ(not_two, 0) << workers << " workers: the destructor dropped tasks";
    }
  });
  EXPECT_THROW(PriorityExecutor(0), std::invalid_argument);
}

}  // namespace
