// Google Benchmark micro-benchmarks for the nanosecond operations of chapter 02, one thread, no
// contention: what a lock/unlock pair costs when nobody else wants the lock (every row of
// kLockVariants), and what one increment of each counter of kCounterVariants costs.
// Registered from the tables, so a new row gets its benchmark without touching this file; the
// harness runs them as ch02/lock_uncontended and ch02/counter_uncontended
// (experiments_atomics.cpp):  concurdl run ch02/lock_uncontended ch02/counter_uncontended
//
// Each iteration runs a batch of kBatch operations through the row's function pointer, so the
// indirect call is amortised; items_per_s counts operations, and 1e9 / items_per_s is the cost
// of one in nanoseconds. Every benchmark checks its work: the protected counter must have
// grown by exactly iterations x kBatch, otherwise it reports an error and the record is invalid.
// UseRealTime() although single-threaded: the harness's samples are real time per iteration, and
// the rate counter should be computed from the same clock.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "concurdl/locks/counters.hpp"
#include "concurdl/locks/lock_variants.hpp"

namespace {

using namespace concurdl::locks;

constexpr std::uint64_t kBatch = 64;

template <class Fn>
void run_batches(benchmark::State& state, Fn batch) {
  const std::uint64_t before = batch(0);
  for (auto _ : state) benchmark::DoNotOptimize(batch(kBatch));
  const std::uint64_t after = batch(0);
  const std::uint64_t want = static_cast<std::uint64_t>(state.iterations()) * kBatch;
  if (after - before != want)
    state.SkipWithError(
        ("the counter grew by " + std::to_string(after - before) + ", not " + std::to_string(want))
            .c_str());
  state.SetItemsProcessed(static_cast<std::int64_t>(want));
}

const bool registered = [] {
  for (const LockVariant& v : kLockVariants)
    benchmark::RegisterBenchmark(
        ("BM_" + std::string(v.name)).c_str(),
        [pairs = v.pairs](benchmark::State& state) { run_batches(state, pairs); })
        ->UseRealTime();
  for (const CounterVariant& v : kCounterVariants)
    benchmark::RegisterBenchmark(
        ("BM_" + std::string(v.name)).c_str(),
        [add = v.add_uncontended](benchmark::State& state) { run_batches(state, add); })
        ->UseRealTime();
  return true;
}();

}  // namespace
