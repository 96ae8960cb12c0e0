// Harness v2 shapes: samples with named metrics, the per-experiment derive(), timers, the
// scaling axis, inapplicable axes, the smoke profile, and records that keep all of it.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <memory>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/runner.hpp"

using namespace concurdl;

namespace {

std::atomic<int> timer_calls{0};

// A timer that reports a fixed time per run, to check that trials are timed by their timer.
class FixedTimer final : public Timer {
 public:
  std::string name() const override { return "fixed"; }
  double time(const std::function<void()>& run) override {
    run();
    ++timer_calls;
    return 0.25;
  }
};

const bool registered = [] {
  // One contention run yields both the rate and the fairness of the same repetition.
  register_experiment({
      .id = "testv2/multi",
      .chapter = "97-samples-test",
      .title = "a trial with two named metrics beside its main one",
      .axes = {{"variant", {"a", "b"}}},
      .metric = "rate",
      .unit = "1/s",
      .lower_is_better = false,
      .metrics = {{"jain_index", "", false, "fairness"}, {"wrong", "", true, "wrong elements"}},
      .derive =
          [](const Params& p, const Work& w, Record& r) {
            r.derived["rate_per_item"] = r.stats.median / w.items;
            r.derived["is_b"] = p.at("variant") == "b" ? 1 : 0;
          },
      .repetitions = 3,
      .prepare =
          [](const Params& p, GroupCache&) {
            auto n = std::make_shared<int>(0);
            const double base = p.at("variant") == "a" ? 100 : 200;
            Trial t;
            t.measure = [n, base]() -> Sample {
              ++*n;
              return {base + *n, {{"jain_index", 1.0 / *n}, {"wrong", 0}}};
            };
            t.work.items = 10;
            return t;
          },
      .derived = {"rate_per_item", "is_b"},
  });
  register_experiment({
      .id = "testv2/missing_metric",
      .chapter = "97-samples-test",
      .title = "a sample that lacks a declared metric",
      .axes = {{"variant", {"a"}}},
      .metrics = {{"jain_index", "", false, ""}},
      .prepare =
          [](const Params&, GroupCache&) {
            Trial t;
            t.measure = [] { return Sample{1.0}; };
            return t;
          },
  });
  register_experiment({
      .id = "testv2/timed",
      .chapter = "97-samples-test",
      .title = "run timed by the trial's timer; observe adds a metric",
      .axes = {{"variant", {"a"}}},
      .metrics = {{"wrong", "", true, ""}},
      .repetitions = 2,
      .prepare =
          [](const Params&, GroupCache&) {
            Trial t;
            t.run = [] {};
            t.observe = [](Sample& s) { s.metrics["wrong"] = 0; };
            t.timer = std::make_shared<FixedTimer>();
            return t;
          },
  });
  // Workers along "ranks": efficiency follows the declared scaling axis. "workers" means nothing
  // for the serial loader: it is measured once, without that parameter.
  register_experiment({
      .id = "testv2/scaling",
      .chapter = "97-samples-test",
      .title = "scaling along ranks; workers inapplicable to serial",
      .axes = {{"loader", {"serial", "parallel"}},
               {"workers", {"1", "2", "4"}, {}, AxisKind::count},
               {"ranks", {"1", "2", "4"}, {"1", "2"}, AxisKind::count},
               {"n", {"8", "64"}, {"16", "32"}, AxisKind::size}},
      .baseline = {{"ranks", "1"}},
      .scaling_axis = "ranks",
      .inapplicable = {{{{"loader", "serial"}}, {"workers"}}},
      .repetitions = 2,
      .prepare =
          [](const Params& p, GroupCache&) {
            const double r = static_cast<double>(param_int(p, "ranks"));
            Trial t;
            t.measure = [r] { return 1.0 / r; };
            return t;
          },
  });
  return true;
}();

std::vector<Record> run_one(const std::string& id, RunOptions opt = {}) {
  opt.progress = false;
  return run_configs(expand({find_experiment(id)}, opt), opt, Calibration{});
}

}  // namespace

TEST(Samples, EveryNamedMetricReachesTheRecordWithItsStatistics) {
  const auto records = run_one("testv2/multi");
  ASSERT_EQ(records.size(), 2u);
  for (const Record& r : records) {
    ASSERT_TRUE(r.valid) << r.validation;
    ASSERT_EQ(r.samples.size(), 3u);
    ASSERT_EQ(r.metrics.size(), 2u);
    const MetricSeries& j = r.metrics.at("jain_index");
    // warm-up was call 1, so the timed repetitions are calls 2, 3, 4.
    EXPECT_EQ(j.samples, (std::vector<double>{1.0 / 2, 1.0 / 3, 1.0 / 4}));
    EXPECT_DOUBLE_EQ(j.stats.median, 1.0 / 3);
    EXPECT_FALSE(j.lower_is_better);
    EXPECT_TRUE(r.metrics.at("wrong").lower_is_better);
    EXPECT_EQ(r.timer, "measured by the trial");
  }
  EXPECT_DOUBLE_EQ(records[0].derived.at("rate_per_item"), 103.0 / 10);
  EXPECT_DOUBLE_EQ(records[1].derived.at("is_b"), 1.0);
}

TEST(Samples, MetricsSurviveTheResultsFile) {
  RunFile f;
  f.records = run_one("testv2/multi");
  const RunFile back = run_from_json(nlohmann::json::parse(to_json(f).dump()), "mem");
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.records[0].metrics.at("jain_index").samples,
            f.records[0].metrics.at("jain_index").samples);
  EXPECT_EQ(back.records[0].metrics.at("wrong").unit, "");
  EXPECT_TRUE(back.records[0].metrics.at("wrong").lower_is_better);
  EXPECT_EQ(back.records[0].timer, f.records[0].timer);
}

TEST(Samples, AMissingMetricMakesTheRecordInvalidByName) {
  const auto records = run_one("testv2/missing_metric");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].valid);
  EXPECT_NE(records[0].validation.find("jain_index"), std::string::npos) << records[0].validation;
}

TEST(Samples, RunIsTimedByTheTrialsTimerAndObserveAddsMetrics) {
  timer_calls = 0;
  const auto records = run_one("testv2/timed");
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(records[0].valid) << records[0].validation;
  EXPECT_EQ(records[0].samples, (std::vector<double>{0.25, 0.25}));
  EXPECT_EQ(records[0].timer, "fixed");
  EXPECT_EQ(records[0].metrics.at("wrong").samples.size(), 2u);
  EXPECT_EQ(timer_calls.load(), 3);  // warm-up + 2
}

TEST(Samples, InapplicableAxesAreMeasuredOnceAndLeftOut) {
  RunOptions opt;
  opt.progress = false;
  const auto configs = expand({find_experiment("testv2/scaling")}, opt);
  // serial: 2 ranks x 2 n (workers dropped); parallel: 3 workers x 2 ranks x 2 n.
  EXPECT_EQ(configs.size(), 4u + 12u);
  for (const Config& c : configs)
    EXPECT_EQ(c.params.count("workers"), c.params.at("loader") == "parallel" ? 1u : 0u);
}

// A figure's `where` naming an axis that means nothing for a record (left out of it) selects the
// record whatever the value; an axis the record holds must match, and one it lacks but that
// would apply to it (a missing parameter, not an inapplicable one) does not select it.
TEST(Samples, AWhereSelectsRecordsWhoseLeftOutAxisIsInapplicable) {
  const Experiment& e = *find_experiment("testv2/scaling");
  const Params serial = {{"loader", "serial"}, {"ranks", "2"}, {"n", "8"}};
  const Params parallel = {{"loader", "parallel"}, {"workers", "2"}, {"ranks", "2"}, {"n", "8"}};
  EXPECT_TRUE(where_selects(e, serial, {{"workers", "3"}}));
  EXPECT_TRUE(where_selects(e, parallel, {{"workers", "2"}, {"n", "8"}}));
  EXPECT_FALSE(where_selects(e, parallel, {{"workers", "3"}}));
  EXPECT_FALSE(where_selects(e, serial, {{"loader", "parallel"}}));
  const Params no_workers = {{"loader", "parallel"}, {"ranks", "2"}, {"n", "8"}};
  EXPECT_FALSE(where_selects(e, no_workers, {{"workers", "2"}}));
  EXPECT_FALSE(params_match(serial, {{"workers", "3"}}));  // the plain match would drop it
}

TEST(Samples, EfficiencyFollowsTheScalingAxisAndBaselinesMatchWithoutInapplicableAxes) {
  RunOptions opt;
  opt.set["n"] = {"8"};
  const auto records = run_one("testv2/scaling", opt);
  int checked = 0;
  for (const Record& r : records) {
    ASSERT_TRUE(r.valid) << r.validation;
    if (r.params.at("ranks") != "2") continue;
    ASSERT_TRUE(r.derived.count("speedup")) << describe(r.params);
    EXPECT_DOUBLE_EQ(r.derived.at("speedup"), 2.0);
    EXPECT_DOUBLE_EQ(r.derived.at("efficiency"), 1.0);
    ++checked;
  }
  EXPECT_EQ(checked, 1 + 3);
}

TEST(Samples, SmokeProfileTakesEveryTextValueAndTheSmallestNumber) {
  RunOptions opt;
  opt.profile = Profile::smoke;
  const auto configs = expand({find_experiment("testv2/scaling")}, opt);
  // serial once; parallel at workers=1; ranks=1; n=16 (the smallest quick value).
  ASSERT_EQ(configs.size(), 2u);
  for (const Config& c : configs) {
    EXPECT_EQ(c.params.at("ranks"), "1");
    EXPECT_EQ(c.params.at("n"), "16");
  }
  EXPECT_EQ(default_repetitions(Profile::smoke), 1);
}

TEST(Samples, NumbersAreRecordedAsNumbersInTheirShortestForm) {
  Record r;
  r.experiment = "x/y";
  r.chapter = "00-x";
  r.params = {{"lr", "0.02"}, {"threads", "2"}, {"n", "16M"}, {"typed", "1.50"}, {"id", "007"}};
  const nlohmann::json j = to_json(r);
  EXPECT_TRUE(j["params"]["lr"].is_number_float());
  EXPECT_EQ(j["params"]["lr"].dump(), "0.02");
  EXPECT_TRUE(j["params"]["threads"].is_number_integer());
  EXPECT_TRUE(j["params"]["n"].is_string());
  EXPECT_TRUE(j["params"]["typed"].is_string());  // "1.50" is kept as typed
  EXPECT_TRUE(j["params"]["id"].is_string());
  RunFile f;
  f.records = {r};
  const RunFile back = run_from_json(nlohmann::json::parse(to_json(f).dump()), "mem");
  EXPECT_EQ(back.records[0].params, r.params);
}

TEST(Samples, VersionOneFilesStillLoad) {
  nlohmann::json v1 = {{"schema_version", 1},
                       {"concurdl_version", "0.1.0"},
                       {"command", {"concurdl", "run"}},
                       {"provenance", {{"host", "h"}}},
                       {"records",
                        {{{"experiment", "ch01/x"},
                          {"chapter", "01-threads"},
                          {"params", {{"threads", 2}}},
                          {"metric", "time"},
                          {"unit", "s"},
                          {"samples", {0.1, 0.2}},
                          {"median", 0.15},
                          {"min", 0.1},
                          {"max", 0.2},
                          {"mean", 0.15},
                          {"stdev", 0.07},
                          {"ci95", {0.1, 0.2}},
                          {"valid", true}}}}};
  const RunFile f = run_from_json(v1, "v1.json");
  EXPECT_EQ(f.schema_version, 1);
  ASSERT_EQ(f.records.size(), 1u);
  EXPECT_TRUE(f.records[0].metrics.empty());
  EXPECT_EQ(f.records[0].params.at("threads"), "2");
  v1["schema_version"] = kSchemaVersion + 1;
  EXPECT_THROW(run_from_json(v1, "future.json"), UsageError);
}

TEST(Samples, AMeasurementAboveItsCeilingIsFlaggedWithTheLikelyCauses) {
  Calibration calib;
  calib.peak_flops = 100e9;
  calib.mem_bandwidth_bytes_per_s = 20e9;
  Record above, below;
  for (Record* r : {&above, &below}) {
    r->experiment = "testv2/multi";
    r->samples = {1.0};
    r->stats = summarize(r->samples);
  }
  above.derived["flops_per_s"] = 150e9;  // above the calibrated peak: impossible
  below.derived["flops_per_s"] = 90e9;
  std::vector<Record> recs = {above, below};
  derive_metrics(recs, calib);
  ASSERT_EQ(recs[0].notes.count("above_ceiling"), 1u);
  EXPECT_NE(recs[0].notes.at("above_ceiling").find("1.50 x the calibrated peak FLOP/s"),
            std::string::npos)
      << recs[0].notes.at("above_ceiling");
  EXPECT_NE(recs[0].notes.at("above_ceiling").find("disturbed"), std::string::npos);
  EXPECT_EQ(recs[1].notes.count("above_ceiling"), 0u);
  // Derived again under a calibration that holds it: the flag goes.
  calib.peak_flops = 200e9;
  derive_metrics(recs, calib);
  EXPECT_EQ(recs[0].notes.count("above_ceiling"), 0u);
}

// The calibrated bandwidth counts no write-allocate traffic, so a kernel that only reads may
// reach up to 1.5x it on a correct run: flagged only above that (and the 5% margin).
TEST(Samples, AReadOnlyKernelMayReachOneAndAHalfTimesTheCalibratedBandwidth) {
  Calibration calib;
  calib.mem_bandwidth_bytes_per_s = 20e9;
  Record reads, impossible;
  for (Record* r : {&reads, &impossible}) {
    r->experiment = "testv2/unregistered_bandwidth";
    r->samples = {1.0};
    r->stats = summarize(r->samples);
  }
  reads.derived["fraction_of_ceiling"] = 1.3;  // a sum over memory, measured at 26 GB/s
  impossible.derived["fraction_of_ceiling"] = 1.7;
  std::vector<Record> recs = {reads, impossible};
  derive_metrics(recs, calib);
  EXPECT_EQ(recs[0].notes.count("above_ceiling"), 0u) << recs[0].notes["above_ceiling"];
  ASSERT_EQ(recs[1].notes.count("above_ceiling"), 1u);
  EXPECT_NE(recs[1].notes.at("above_ceiling").find("1.70 x the calibrated memory bandwidth"),
            std::string::npos)
      << recs[1].notes.at("above_ceiling");
}

// A speedup above the CPUs the run had is as impossible as a rate above the calibration: two CPUs
// cannot do three times one CPU's work in the same time (threads timed from different starts).
TEST(Samples, ASpeedupAboveTheCpusIsFlagged) {
  Calibration calib;
  Record fast, fine;
  for (Record* r : {&fast, &fine}) {
    r->experiment = "testv2/multi";
    r->samples = {1.0};
    r->stats = summarize(r->samples);
  }
  fast.derived["speedup"] = 3.16;
  fine.derived["speedup"] = 2.15;  // within the 10% that caches and two medians' noise may add
  std::vector<Record> recs = {fast, fine};
  derive_metrics(recs, calib, 2);
  ASSERT_EQ(recs[0].notes.count("above_ceiling"), 1u);
  EXPECT_NE(recs[0].notes.at("above_ceiling").find("a speedup of 3.16 on 2 CPUs"),
            std::string::npos)
      << recs[0].notes.at("above_ceiling");
  EXPECT_EQ(recs[1].notes.count("above_ceiling"), 0u);
  derive_metrics(recs, calib);  // CPUs not known: not judged
  EXPECT_EQ(recs[0].notes.count("above_ceiling"), 0u);
}

// A GPU's GEMM runs at many times the CPU's peak FLOP/s: the device's roofline bounds it
// (judge_roofline), and the CPU's calibration neither flags it when derived nor, in a file an
// older concurdl wrote, when read.
TEST(Samples, WorkTimedOnADeviceIsNotHeldToTheCpusCeiling) {
  Calibration calib;
  calib.peak_flops = 100e9;
  Record gpu;
  gpu.experiment = "testv2/multi";
  gpu.timer = "cuda_events";
  gpu.samples = {1.0};
  gpu.stats = summarize(gpu.samples);
  gpu.derived["flops_per_s"] = 50e12;
  std::vector<Record> recs = {gpu};
  derive_metrics(recs, calib);
  EXPECT_EQ(recs[0].notes.count("above_ceiling"), 0u);

  recs[0].notes["above_ceiling"] = "500.00 x the calibrated peak FLOP/s: ...";
  recs[0].notes["occupancy"] = "100%";
  RunFile f;
  f.records = recs;
  const RunFile g = run_from_json(to_json(f), "old.json");
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0].notes.count("above_ceiling"), 0u);
  EXPECT_EQ(g.records[0].notes.at("occupancy"), "100%");  // the other notes stay
}
