// The Google Benchmark bridge: runs become records, threaded runs must use real time.
#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include <atomic>

#include "concurdl/harness/gbench.hpp"

using namespace concurdl;

namespace {

void BM_bridge_test_add(benchmark::State& state) {
  std::int64_t x = 0;
  for (auto _ : state) benchmark::DoNotOptimize(x += state.range(0));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_bridge_test_add)->Arg(3)->Arg(5)->Threads(1)->Threads(2)->UseRealTime();

void BM_bridge_test_cpu_time(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(state.iterations());
}
BENCHMARK(BM_bridge_test_cpu_time)->Threads(2);

const bool registered = [] {
  register_microbenchmarks({.id = "test/bridge_add",
                            .chapter = "98-runner-test",
                            .title = "add",
                            .filter = "^BM_bridge_test_add",
                            .arg_names = {"step"},
                            .baseline = {{"threads", "1"}}});
  register_microbenchmarks({.id = "test/bridge_cpu",
                            .chapter = "98-runner-test",
                            .title = "cpu",
                            .filter = "^BM_bridge_test_cpu_time"});
  return true;
}();

}  // namespace

TEST(GBenchBridge, EveryRepetitionBecomesASample) {
  auto records = run_microbenchmarks(*find_experiment("test/bridge_add"), Profile::quick, 3);
  ASSERT_EQ(records.size(), 4u);  // 2 args x 2 thread counts
  for (const Record& r : records) {
    EXPECT_TRUE(r.valid) << r.validation;
    EXPECT_EQ(r.experiment, "test/bridge_add");
    EXPECT_EQ(r.params.at("variant"), "bridge_test_add");
    EXPECT_TRUE(r.params.at("step") == "3" || r.params.at("step") == "5");
    EXPECT_TRUE(r.params.at("threads") == "1" || r.params.at("threads") == "2");
    EXPECT_EQ(r.samples.size(), 3u);
    EXPECT_GT(r.stats.median, 0);
    EXPECT_LT(r.stats.median, 1e-3);  // seconds per iteration of one add
    EXPECT_GT(r.derived.at("items_per_s"), 0);
  }
}

TEST(GBenchBridge, ThreadedBenchmarkWithoutRealTimeIsFlagged) {
  auto records = run_microbenchmarks(*find_experiment("test/bridge_cpu"), Profile::quick, 2);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].valid);
  EXPECT_NE(records[0].validation.find("UseRealTime"), std::string::npos);
}
