// Counters (counters.hpp) and the uncontended cost of every lock:
//   ch02/counter               increments/s of one shared counter vs threads: mutex, fetch_add,
//                              CAS loop, per-thread sharded slots; the total must be exact
//   ch02/lock_uncontended      Google Benchmark: one lock/unlock pair, one thread, per lock
//   ch02/counter_uncontended   Google Benchmark: one increment, one thread, per counter
// The micro-benchmarks are registered from the tables in bench/uncontended.cpp.
//   concurdl run ch02/counter ch02/lock_uncontended ch02/counter_uncontended
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/gbench.hpp"
#include "concurdl/locks/counters.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "experiments_common.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::locks;
using namespace concurdl::locks::experiments;

Trial counter_trial(const Params& p, GroupCache&) {
  const CounterVariant& v = kCounterVariants.find(p);
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  const auto per_thread = static_cast<std::uint64_t>(param_int(p, "increments"));
  auto total = std::make_shared<std::uint64_t>(0);
  Trial t;
  t.reset = [total] { *total = 0; };
  t.run = [=, count = v.count] { *total = count(threads, per_thread); };
  t.check = [=]() -> std::string {
    const std::uint64_t want = std::uint64_t{threads} * per_thread;
    return *total == want
               ? std::string()
               : fmt::format("the counter reads {}, not {}: increments lost", *total, want);
  };
  t.work = {.items = static_cast<double>(threads) * static_cast<double>(per_thread)};
  return t;
}

// "^BM_(a|b|c)(/|$)": exactly the table's rows (Google Benchmark appends /real_time and the like).
template <class Table>
std::string filter_for(const Table& table) {
  std::vector<std::string> names;
  for (const auto& row : table) names.emplace_back(row.name);
  return fmt::format("^BM_({})(/|$)", fmt::join(names, "|"));
}

const bool registered = [] {
  register_experiment({
      .id = "ch02/counter",
      .chapter = "02-locks",
      .title = "One shared counter: increments/s vs threads (mutex, fetch_add, CAS loop, sharded)",
      .axes = {kCounterVariants.axis("ch02/counter"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               // Per thread; a contended increment takes tens of nanoseconds, so 2^30 of them
               // take a minute or more per thread.
               {"increments", {"1M"}, {"200K"}, AxisKind::size, std::int64_t{1} << 30}},
      .baseline = {{"variant", "v1_mutex"}},
      .prepare = counter_trial,
      .figures = {{.id = "rate",
                   .title = "Shared counter: increments/s vs threads",
                   .kind = FigureKind::lines,
                   .y = "items_per_s",
                   .log_y = true,
                   .y_label = "increments/s (log)"}},
      .claims = {{.id = "sharded_beats_fetch_add",
                  // A magnitude: the contended line's round trip between the cores, which vCPUs
                  // sharing a core hide.
                  .statement = "How many times as fast per-thread sharded counters, which share "
                               "nothing until read, count as one fetch_add counter at 2 threads",
                  .select = {{"variant", "v4_sharded"}, {"threads", "2"}},
                  .versus = {{"variant", "v2_fetch_add"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::cores_and_smt, ClaimCause::caches},
                  .unit = "×",
                  .min_cpus = 2}},
  });

  register_microbenchmarks({.id = "ch02/lock_uncontended",
                            .chapter = "02-locks",
                            .title = "Uncontended lock/unlock pair, one thread (Google Benchmark)",
                            .filter = filter_for(kLockVariants),
                            .figures = {{.id = "rate",
                                         .title = "Uncontended lock+unlock pairs/s, one thread",
                                         .kind = FigureKind::bars,
                                         .x = "variant",
                                         .y = "items_per_s",
                                         .series = "threads",
                                         .y_label = "pairs/s (1e9 / rate = ns per pair)"}}});
  register_microbenchmarks({.id = "ch02/counter_uncontended",
                            .chapter = "02-locks",
                            .title = "One counter increment, one thread (Google Benchmark)",
                            .filter = filter_for(kCounterVariants),
                            .figures = {{.id = "rate",
                                         .title = "Uncontended increments/s, one thread",
                                         .kind = FigureKind::bars,
                                         .x = "variant",
                                         .y = "items_per_s",
                                         .series = "threads",
                                         .y_label = "increments/s (1e9 / rate = ns each)"}}});
  return true;
}();

}  // namespace
