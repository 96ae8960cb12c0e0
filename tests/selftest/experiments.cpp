// Chapter 99, "selftest": a toy chapter linked only into `concurdl-selftest`, the program the
// harness's CLI and end-to-end tests drive. It has one of everything a real chapter has: an
// experiment with a thread sweep, one that can be made to fail validation, micro-benchmarks
// (one deliberately threaded without UseRealTime) and three exercises, one per outcome.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/harness/cli.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/gbench.hpp"
#include "toy_sum.hpp"

namespace {

using namespace concurdl;

Trial sum_trial(const Params& p, GroupCache&) {
  const std::int64_t n = param_int(p, "n");
  const int threads = static_cast<int>(param_int(p, "threads"));
  const bool broken = param_int(p, "broken") != 0;
  auto result = std::make_shared<std::int64_t>(0);
  Trial t;
  t.run = [=] {
    trace::Span step("sum", "step");  // one span a repetition, for run --trace
    *result = toy::parallel_sum(n, threads) + (broken ? 1 : 0);
  };
  t.check = [=] {
    const std::int64_t want = toy::serial_sum(n);
    return *result == want ? std::string() : fmt::format("sum {} != {}", *result, want);
  };
  t.work = {static_cast<double>(n), 0, static_cast<double>(n)};
  return t;
}

const bool registered = [] {
  register_chapter({"99-selftest", "Self-test chapter (harness tests only)"});
  register_experiment({
      .id = "ch99/sum",
      .chapter = "99-selftest",
      .title = "Toy parallel sum of 0..n-1 (OpenMP)",
      .axes = {{"threads", thread_counts(), {"1", "2"}, AxisKind::count},
               {"n", {"4M"}, {"1M"}, AxisKind::size},
               {"broken", {"0"}, {}, AxisKind::integer}},
      .baseline = {{"threads", "1"}},
      .prepare = sum_trial,
      .figures = {{.id = "speedup",
                   .title = "Toy sum: speedup",
                   .kind = FigureKind::speedup,
                   .series = "n"},
                  {.id = "efficiency",
                   .title = "Toy sum: efficiency",
                   .kind = FigureKind::efficiency,
                   .y = "efficiency",
                   .series = "n"}},
      // One claim per outcome for the CLI tests: right (held; not held with --set broken=1),
      // a GPU's (not applicable here), a speedup (not applicable on the smoke profile).
      .claims = {{.id = "right",
                  .statement = "The toy sum is right at one thread",
                  .select = {{"threads", "1"}},
                  .bound = 0,
                  .unit = "s",
                  .timing = false},
                 {.id = "on_a_gpu",
                  .statement = "A claim only a GPU machine judges",
                  .select = {{"threads", "1"}},
                  .bound = 0,
                  .needs_gpu = true},
                 {.id = "speedup",
                  .statement = "Two threads are not slower than a tenth of one",
                  .select = {{"threads", "2"}},
                  .field = "speedup",
                  .bound = 0.1,
                  .unit = "×",
                  .min_cpus = 2}},
  });
  register_microbenchmarks({.id = "ch99/atomic_increment",
                            .chapter = "99-selftest",
                            .title = "fetch_add on one shared counter",
                            .filter = "^BM_toy_atomic_increment",
                            .baseline = {{"threads", "1"}},
                            .figures = {{.id = "throughput",
                                         .title = "atomic increments/s",
                                         .kind = FigureKind::bars,
                                         .y = "items_per_s"}}});
  register_microbenchmarks({.id = "ch99/cpu_time_threads",
                            .chapter = "99-selftest",
                            .title = "A threaded benchmark without UseRealTime (must be flagged)",
                            .filter = "^BM_toy_no_real_time"});
  for (int k = 1; k <= 7; ++k) {
    const std::string id = fmt::format("99.{}", k);
    Experiment timing{
        .id = "ch99/exercise_" + id,
        .chapter = "99-selftest",
        .title = "sum, student vs reference",
        .axes = {{"impl", {"reference", "student"}}, {"n", {"1M"}, {}, AxisKind::size}},
        .interleave = {"impl"},
        .prepare = [k](const Params& p, GroupCache&) {
          const std::int64_t n = param_int(p, "n");
          const bool student = p.at("impl") == "student";
          auto result = std::make_shared<std::int64_t>(0);
          auto repetition = std::make_shared<int>(0);
          Trial t;
          // The sum runs for real (and is checked), but the sample is a modelled cost: 5 ms,
          // 20 ms for 99.5 (4x: the 5 ms it wastes a call, as a lock per element would, against
          // a sum of microseconds), within +-1% from one repetition to the next. What the
          // exercise tests check is the verdict drawn from the samples, which must not depend
          // on this machine's load: timed for real (5 ms sleeps on both sides), a CI machine's
          // late wake-ups made the same-speed attempt INCONCLUSIVE against 1.2x and the slow
          // one's interval reach down to 1.15x. Real timing is what every other experiment of
          // the toy chapter does.
          // 99.7 is as fast as the reference, but its first 20 samples in a process swing by
          // +-40% (a noisy start): one round of 15 cannot decide against 1.2x, the pooled
          // samples of a second round can.
          t.measure = [=] {
            *result = student ? toy::student_sum(k, n) : toy::serial_sum(n);
            const double cost = student && k == 5 ? 0.020 : 0.005;
            const int i = (*repetition)++;
            static int noisy_start = 0;
            if (student && k == 7 && noisy_start < 20)
              return Sample{cost * (1.0 + 0.4 * static_cast<double>(noisy_start++ % 3 - 1))};
            const double wobble = 1.0 + 0.01 * static_cast<double>(i % 3 - 1);
            return Sample{cost * wobble};
          };
          t.check = [=] {
            return *result == toy::serial_sum(n) ? std::string() : std::string("wrong sum");
          };
          t.work = {static_cast<double>(n)};
          return t;
        }};
    if (k == 6)
      timing.unavailable = [] { return std::string("no toy device: this machine has none"); };
    register_exercise({.id = id,
                       .chapter = "99-selftest",
                       .title = k == 1   ? "untouched stub"
                                : k == 2 ? "wrong attempt"
                                : k == 3 ? "right attempt"
                                : k == 4 ? "endless loop"
                                : k == 5 ? "slow attempt"
                                : k == 6 ? "timed on a device"
                                         : "noisy start",
                       .test_binary = "ch99_tests",
                       .test_filter = fmt::format("ToySum/ex99_{}.*", k),
                       .timing = timing,
                       .questions = {"Your sum took {student} against the reference's "
                                     "{reference} at {configuration} ({cost} {cost_ci}). Why?",
                                     "What would change on a machine other than {machine}?"}});
  }
  return true;
}();

void BM_toy_atomic_increment(benchmark::State& state) {
  static std::atomic<std::int64_t> counter{0};
  for (auto _ : state) counter.fetch_add(1, std::memory_order_relaxed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_toy_atomic_increment)->Threads(1)->Threads(2)->UseRealTime();

void BM_toy_no_real_time(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(state.iterations());
}
BENCHMARK(BM_toy_no_real_time)->Threads(2);

// Across MPI ranks (`concurdl-selftest run --ranks 2 ch99/ranks_sleep`): rank k sleeps
// (k + 1) x 5 ms, so every sample must be the slowest rank's 10 ms, never rank 0's own 5 ms.
// The `measure` variant reports each rank's own number; the record must hold the largest.
const bool registered_ranks = [] {
  register_experiment({
      .id = "ch99/ranks_sleep",
      .chapter = "99-selftest",
      .title = "Each rank sleeps (rank + 1) x 5 ms: the time is the max over ranks",
      .axes = {{"variant", {"timed", "measured"}}, {"ranks", {"2"}, {}, AxisKind::count}},
      .scaling_axis = "ranks",
      .mpi = true,
      .repetitions = 3,
      .prepare =
          [](const Params& p, GroupCache&) {
            const int me = ranks::comm_rank();
            const auto nap = std::chrono::milliseconds(5 * (me + 1));
            Trial t;
            if (p.at("variant") == "timed")
              t.run = [nap] { std::this_thread::sleep_for(nap); };
            else
              t.measure = [me] { return Sample{0.005 * (me + 1)}; };
            t.check = [] {
              return ranks::comm_size() == 2 ? std::string()
                                             : fmt::format("{} ranks, want 2", ranks::comm_size());
            };
            return t;
          },
  });
  return true;
}();

// A command of the toy chapter's own (as the training stack registers `train`), and an
// experiment that only it records: `run` must leave that one out.
int toy_echo(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "fail") throw UsageError("toy-echo: 'fail' was asked for");
  for (const auto& a : args) std::printf("%s\n", a.c_str());
  return args.size() == 1 && args[0] == "exit3" ? 3 : 0;
}

const bool registered_command = [] {
  register_command({"toy-echo", "prints its arguments, one per line", &toy_echo});
  register_experiment({.id = "ch99/recorded",
                       .chapter = "99-selftest",
                       .title = "Recorded by toy-echo",
                       .axes = {{.name = "epoch", .values = {"0"}, .kind = AxisKind::integer}},
                       .recorded_by = "toy-echo"});
  return true;
}();

}  // namespace
