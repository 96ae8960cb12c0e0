// Registers the threads-vs-processes experiments (processes.hpp, ping_pong.hpp):
//   ch01/process_reduction  one sum by N threads, N forked processes over shared memory, N over
//   pipes ch01/spawn_cost         creating a thread vs a process vs a process running /bin/true
//   ch01/ping_pong          round-trip latency: condition variable, atomic wait, spin, pipes
// Run: concurdl run ch01/process_reduction ch01/spawn_cost ch01/ping_pong
#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/threads/ping_pong.hpp"
#include "concurdl/threads/processes.hpp"
#include "concurdl/threads/spawn_cost.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::threads;

// --- ch01/process_reduction --------------------------------------------------------------------

struct IntInput {
  std::vector<std::int32_t> x;
  std::int64_t sum = 0;
};

Trial reduction_trial(const Params& p, GroupCache& cache) {
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  const int workers = static_cast<int>(param_int(p, "workers"));
  const ReduceFn reduce = kProcessReduceVariants.find(p).reduce;
  const IntInput& in = cache.get<IntInput>("input", [n] {
    IntInput i{make_int_input(n), 0};
    i.sum = sum_serial(i.x);
    return i;
  });
  auto result = std::make_shared<std::int64_t>(0);
  Trial t;
  // Workers (threads or processes) are created and joined inside every run: this experiment
  // measures fork-join with fresh workers, creation cost included.
  t.run = [&in, result, reduce, workers] { *result = reduce(in.x, workers, FailureInjection{}); };
  t.check = [&in, result]() -> std::string {
    return *result == in.sum
               ? std::string()
               : fmt::format("sum {} differs from the serial sum {}", *result, in.sum);
  };
  t.work = {.items = double(n), .bytes = double(n * sizeof(std::int32_t)), .flops = double(n)};
  return t;
}

// --- ch01/spawn_cost ----------------------------------------------------------------------------

// Memory the parent has touched before it forks: fork copies a page-table entry per 4 KiB page.
struct Ballast {
  std::vector<unsigned char> bytes;
};

Trial spawn_trial(const Params& p, GroupCache& cache) {
  const int spawns = static_cast<int>(param_int(p, "spawns"));
  const std::int64_t mib = param_int(p, "parent_mib");  // 0 .. 64 GiB (the axis's limits)
  const SpawnFn spawn = kSpawnVariants.find(p).spawn;
  // Filled with ones, not zeros, so that every page is really written and mapped.
  cache.get<Ballast>(
      "ballast", [mib] { return Ballast{std::vector<unsigned char>(std::size_t(mib) << 20, 1)}; });
  auto completed = std::make_shared<std::int64_t>(0);
  Trial t;
  t.measure = [completed, spawn, spawns] {
    const SpawnResult r = spawn(spawns);
    *completed = r.completed;
    return r.seconds / spawns;
  };
  t.check = [completed, spawns]() -> std::string {
    return *completed == spawns
               ? std::string()
               : fmt::format("{} of {} workers ran and ended cleanly", *completed, spawns);
  };
  return t;
}

// --- ch01/ping_pong -----------------------------------------------------------------------------

Trial ping_pong_trial(const Params& p, GroupCache&) {
  const std::int64_t round_trips = param_int(p, "round_trips");
  const PingPongFn run = kPingPongVariants.find(p).run;
  auto last = std::make_shared<PingPongResult>();
  Trial t;
  // Timed inside: the partner thread or process is started and warmed up by one untimed round
  // trip, so the metric is the round trip alone.
  t.measure = [last, run, round_trips] {
    *last = run(round_trips);
    return last->seconds / double(round_trips);
  };
  t.check = [last, round_trips]() -> std::string {
    const std::int64_t want = expected_hops(round_trips);
    if (last->counter != want) return fmt::format("{} hops counted, {} made", last->counter, want);
    if (last->out_of_turn != 0)
      return fmt::format("{} wake-ups found the counter off their turn", last->out_of_turn);
    return {};
  };
  return t;
}

Experiment process_reduction_experiment() {
  const std::string hw = std::to_string(hardware_threads());
  return {
      .id = "ch01/process_reduction",
      .chapter = "01-threads",
      .title =
          "Threads vs processes: one integer sum by N threads, N processes over MAP_SHARED "
          "memory, N processes over pipes",
      .axes = {kProcessReduceVariants.axis("ch01/process_reduction"),
               {"workers", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"n", {"16M", "64M"}, {"16M"}, AxisKind::size, max_elements(sizeof(std::int32_t))}},
      // Everything against one thread, so the processes' creation cost shows as speedup < 1.
      .baseline = {{"variant", "threads"}, {"workers", "1"}},
      .scaling_axis = "workers",
      .ceiling = Ceiling::mem_bandwidth,
      .interleave = {"variant", "workers"},
      .prepare = reduction_trial,
      .figures =
          {
              // Ideal line only: against another variant's baseline, an Amdahl fit means nothing.
              {.id = "speedup",
               .title = "Sum of n int32: speedup over one thread",
               .kind = FigureKind::speedup,
               .x = "workers",
               .overlays = {Overlay::ideal}},
              {.id = "bars",
               .title = "Sum of n int32: time at " + hw + " workers",
               .kind = FigureKind::bars,
               .x = "variant",
               .series = "n",
               .where = {{"workers", hw}}},
          },
  };
}

Experiment spawn_cost_experiment() {
  return {
      .id = "ch01/spawn_cost",
      .chapter = "01-threads",
      .title = "Creation + join cost: a thread, a forked process, a process running /bin/true",
      .axes = {kSpawnVariants.axis("ch01/spawn_cost"),
               // The memory the parent has touched: 0 .. 64 GiB.
               {.name = "parent_mib",
                .values = {"0", "256", "2048"},
                .quick = {"0", "256"},
                .kind = AxisKind::integer,
                .max = 1 << 16,
                .min = 0},
               // A fork of a large parent takes milliseconds: 100000 of them, minutes.
               {"spawns", {"100"}, {"20"}, AxisKind::count, 100'000}},
      .baseline = {{"variant", "std_thread"}},
      .metric = "time_per_spawn",
      .unit = "s",
      .interleave = {"variant"},
      .prepare = spawn_trial,
      .figures =
          {
              {.id = "bars",
               .title = "Cost of creating and joining one worker",
               .kind = FigureKind::bars,
               .x = "variant",
               .series = "parent_mib",
               .log_y = true,
               .y_label = "seconds per spawn (log)"},
          },
      .claims = {{.id = "thread_cheaper_than_fork",
                  // A magnitude: the kernel's cost of copying page tables against a clone (40-292x
                  // on the committed guests).
                  .statement = "How many times cheaper creating and joining a thread is than fork "
                               "+ waitpid of a process",
                  .select = {{"variant", "std_thread"}},
                  .versus = {{"variant", "fork_waitpid"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::memory_bandwidth, ClaimCause::wakeup_latency},
                  .unit = "×"}},
  };
}

Experiment ping_pong_experiment() {
  return {
      .id = "ch01/ping_pong",
      .chapter = "01-threads",
      .title = "Round-trip latency between two threads or two processes",
      .axes = {kPingPongVariants.axis("ch01/ping_pong"),
               // modest in quick: a spinner without a core of its own can lose a time slice a hop
               // The atomic rows count hops in a 32-bit futex word: 2 (round_trips + 1) < 2^31.
               {"round_trips", {"20000"}, {"2000"}, AxisKind::count, 1 << 29}},
      .baseline = {{"variant", "condvar"}},
      .metric = "round_trip_time",
      .unit = "s",
      .interleave = {"variant"},
      .prepare = ping_pong_trial,
      .figures =
          {
              {.id = "bars",
               .title = "Ping-pong: time per round trip",
               .kind = FigureKind::bars,
               .x = "variant",
               .series = "round_trips",
               .log_y = true,
               .y_label = "seconds per round trip (log)"},
          },
  };
}

const bool registered = [] {
  register_experiment(process_reduction_experiment());
  register_experiment(spawn_cost_experiment());
  register_experiment(ping_pong_experiment());
  return true;
}();

}  // namespace
