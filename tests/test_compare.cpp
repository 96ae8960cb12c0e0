// Tests of `concurdl compare` on runs built in memory: matching of configurations, the verdict
// rules (significance, CI, direction of the metric, validity) and both output forms.
// Run: build/bin/harness_tests --gtest_filter='Compare*'
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "concurdl/harness/compare.hpp"

namespace concurdl {
namespace {

// A repetition pattern with a few percent of spread, scaled to `level`.
std::vector<double> samples_around(double level, int n = 8) {
  static const double kSpread[] = {1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.00, 1.015, 0.985};
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(level * kSpread[i % 10]);
  return v;
}

Record make_record(const std::string& experiment, const Params& params,
                   std::vector<double> samples) {
  Record r;
  r.experiment = experiment;
  r.chapter = "01-threads";
  r.params = params;
  r.samples = std::move(samples);
  r.stats = summarize(r.samples);
  return r;
}

RunFile run_of(std::vector<Record> records) {
  RunFile f;
  f.records = std::move(records);
  return f;
}

const Params kParams = {{"threads", "2"}, {"variant", "v1_naive"}};

TEST(CompareVerdict, ClearlySlowerBIsSlower) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.5))});
  const CompareResult r = compare_runs(a, b);
  ASSERT_EQ(r.rows.size(), 1u);
  const Comparison& c = r.rows[0];
  EXPECT_EQ(c.verdict, "slower");
  EXPECT_EQ(c.experiment, "ch01/parallel_sum");
  EXPECT_EQ(c.params, kParams);
  EXPECT_EQ(c.metric, "time");
  EXPECT_EQ(c.unit, "s");
  EXPECT_DOUBLE_EQ(c.median_a, 1.0);
  EXPECT_DOUBLE_EQ(c.median_b, 1.5);
  EXPECT_DOUBLE_EQ(c.ratio.value, 1.5);  // B / A
  EXPECT_GT(c.ratio.lo, 1);
  EXPECT_LT(c.test.p_value, 0.01);
  EXPECT_DOUBLE_EQ(c.test.u, 64);  // U of B: all 8 x 8 pairs have B above A
  EXPECT_TRUE(r.only_a.empty());
  EXPECT_TRUE(r.only_b.empty());
}

TEST(CompareVerdict, ClearlyFasterBIsFaster) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", kParams, samples_around(0.5))});
  const CompareResult r = compare_runs(a, b);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, "faster");
  EXPECT_LT(r.rows[0].ratio.hi, 1);
}

TEST(CompareVerdict, IdenticalSamplesAreSame) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0))});
  const CompareResult r = compare_runs(a, a);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_DOUBLE_EQ(r.rows[0].ratio.value, 1);
  EXPECT_NEAR(r.rows[0].test.p_value, 1, 1e-12);
}

TEST(CompareVerdict, OverlappingNoiseIsSame) {
  // Medians differ by 1% inside a +-3% spread: neither test nor CI can call it.
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.00))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.01))});
  EXPECT_EQ(compare_runs(a, b).rows.at(0).verdict, "same");
}

TEST(CompareVerdict, ThreeRepetitionsAreTooFewForAVerdict) {
  // With 3 + 3 samples the smallest possible two-sided p is 0.081 (U = 0, z = 4 / 2.29), so even
  // a 2x difference stays "same"; at 4 + 4, complete separation gives p = 0.030.
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0, 3))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", kParams, samples_around(2.0, 3))});
  const Comparison c = compare_runs(a, b).rows.at(0);
  EXPECT_NEAR(c.test.p_value, 0.0809, 1e-3);
  EXPECT_EQ(c.verdict, "same");
}

TEST(CompareVerdict, HigherIsBetterMetricFlipsTheVerdict) {
  auto throughput = [](double level) {
    Record r = make_record("ch02/lock_throughput", kParams, samples_around(level));
    r.metric = "ops_per_s";
    r.unit = "ops/s";
    r.lower_is_better = false;
    return r;
  };
  const RunFile a = run_of({throughput(1e6)});
  EXPECT_EQ(compare_runs(a, run_of({throughput(2e6)})).rows.at(0).verdict, "faster");
  EXPECT_EQ(compare_runs(a, run_of({throughput(0.5e6)})).rows.at(0).verdict, "slower");
}

TEST(CompareVerdict, InvalidRecordGivesInvalid) {
  Record bad = make_record("ch01/parallel_sum", kParams, samples_around(1.5));
  bad.valid = false;
  bad.validation = "sum differs from the reference";
  const RunFile good = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0))});
  const RunFile broken = run_of({bad});
  const CompareResult ab = compare_runs(good, broken);
  ASSERT_EQ(ab.rows.size(), 1u);
  EXPECT_EQ(ab.rows[0].verdict, "invalid");
  EXPECT_DOUBLE_EQ(ab.rows[0].median_b, 1.5);  // the numbers are still shown
  EXPECT_EQ(compare_runs(broken, good).rows.at(0).verdict, "invalid");
}

TEST(CompareVerdict, EmptySamplesOrDifferentUnitsAreInvalid) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0))});
  Record empty = make_record("ch01/parallel_sum", kParams, samples_around(1.0));
  empty.samples.clear();
  EXPECT_EQ(compare_runs(a, run_of({empty})).rows.at(0).verdict, "invalid");
  Record in_ms = make_record("ch01/parallel_sum", kParams, samples_around(1000.0));
  in_ms.unit = "ms";
  EXPECT_EQ(compare_runs(a, run_of({in_ms})).rows.at(0).verdict, "invalid");
}

TEST(CompareMatching, UnmatchedConfigurationsAreListed) {
  const Params two = {{"threads", "2"}, {"variant", "v1_naive"}};
  const Params four = {{"threads", "4"}, {"variant", "v1_naive"}};
  const Params eight = {{"threads", "8"}, {"variant", "v1_naive"}};
  const RunFile a = run_of({make_record("ch01/parallel_sum", two, samples_around(1.0)),
                            make_record("ch01/parallel_sum", four, samples_around(0.6)),
                            make_record("ch01/false_sharing", {}, samples_around(2.0))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", eight, samples_around(0.4)),
                            make_record("ch01/parallel_sum", two, samples_around(1.0))});
  const CompareResult r = compare_runs(a, b);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].params, two);
  EXPECT_EQ(r.only_a, (std::vector<std::string>{"ch01/parallel_sum {threads=4, variant=v1_naive}",
                                                "ch01/false_sharing {}"}));
  EXPECT_EQ(r.only_b,
            (std::vector<std::string>{"ch01/parallel_sum {threads=8, variant=v1_naive}"}));
}

TEST(CompareMatching, SameParamsDifferentExperimentDoNotMatch) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0))});
  const RunFile b = run_of({make_record("ch01/parallel_max", kParams, samples_around(1.0))});
  const CompareResult r = compare_runs(a, b);
  EXPECT_TRUE(r.rows.empty());
  EXPECT_EQ(r.only_a.size(), 1u);
  EXPECT_EQ(r.only_b.size(), 1u);
}

TEST(CompareMatching, RepeatedConfigurationPairsByMetric) {
  // One configuration recorded under two metrics, in a different order in each run.
  auto rec = [](const std::string& metric, double level) {
    Record r = make_record("ch03/loader", kParams, samples_around(level));
    r.metric = metric;
    r.unit = metric == "time" ? "s" : "B/s";
    r.lower_is_better = metric == "time";
    return r;
  };
  const RunFile a = run_of({rec("time", 1.0), rec("bytes_per_s", 1e9)});
  const RunFile b = run_of({rec("bytes_per_s", 1e9), rec("time", 1.0)});
  const CompareResult r = compare_runs(a, b);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].metric, "time");
  EXPECT_EQ(r.rows[0].verdict, "same");
  EXPECT_EQ(r.rows[1].metric, "bytes_per_s");
  EXPECT_EQ(r.rows[1].verdict, "same");
}

TEST(CompareOutput, JsonHasTheDocumentedKeys) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0)),
                            make_record("ch01/only_here", {}, samples_around(1.0))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.5))});
  const nlohmann::json j = to_json(compare_runs(a, b));
  ASSERT_TRUE(j.contains("rows"));
  ASSERT_EQ(j["rows"].size(), 1u);
  const nlohmann::json& row = j["rows"][0];
  for (const char* key : {"experiment", "params", "metric", "unit", "median_a", "median_b", "ratio",
                          "ratio_ci95", "u", "z", "p_value", "verdict"}) {
    EXPECT_TRUE(row.contains(key)) << key;
  }
  EXPECT_EQ(row["experiment"], "ch01/parallel_sum");
  EXPECT_EQ(row["params"]["threads"], "2");
  EXPECT_EQ(row["verdict"], "slower");
  ASSERT_TRUE(row["ratio_ci95"].is_array());
  EXPECT_EQ(row["ratio_ci95"].size(), 2u);
  EXPECT_DOUBLE_EQ(row["ratio"].get<double>(), 1.5);
  EXPECT_EQ(j["only_a"], nlohmann::json::array({"ch01/only_here {}"}));
  EXPECT_TRUE(j["only_b"].is_array());
  EXPECT_TRUE(j["only_b"].empty());
}

TEST(CompareOutput, TableShowsRowsAndCounts) {
  const RunFile a = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.0)),
                            make_record("ch01/only_here", {}, samples_around(1.0))});
  const RunFile b = run_of({make_record("ch01/parallel_sum", kParams, samples_around(1.5))});
  const std::string t = format_table(compare_runs(a, b));
  for (const char* part :
       {"experiment", "median A", "ch01/parallel_sum", "threads=2, variant=v1_naive", "1 s",
        "1.5 s", "1.500", "slower", "1 configuration only in A", "ch01/only_here {}",
        "0 configurations only in B"}) {
    EXPECT_NE(t.find(part), std::string::npos) << part << "\n" << t;
  }
  EXPECT_NE(format_table({}).find("no configuration is in both runs"), std::string::npos);
}

}  // namespace
}  // namespace concurdl
