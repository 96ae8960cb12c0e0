// The runner: sweep expansion and its errors, round-robin interleaving, validation before and
// after timing, group-shared inputs, derived metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/runner.hpp"
#include "runner_test_util.hpp"

using namespace concurdl;
using concurdl::test::configs_of;

namespace {

std::mutex log_mu;
std::vector<std::string> run_log;  // which configuration ran, in order
std::atomic<int> inputs_built{0};

// Time is simulated through `measure`: T(p) = 1 * (f + (1 - f) / p) with f = 0.2, so the
// derived speedup and efficiency have exact expected values.
const bool registered = [] {
  register_experiment({
      .id = "test/runner_amdahl",
      .chapter = "98-runner-test",
      .title = "simulated Amdahl timings",
      .axes = {{"variant", {"a", "b"}},
               {"threads", {"1", "2", "4"}, {"1", "2"}, AxisKind::count},
               {"n", {"100", "200"}, {"100"}, AxisKind::size, std::int64_t{1} << 20}},
      .baseline = {{"threads", "1"}},
      .repetitions = 4,
      .prepare =
          [](const Params& p, GroupCache& cache) {
            cache.get<int>("input", [] { return ++inputs_built; });
            const double threads = static_cast<double>(param_int(p, "threads"));
            const std::string key = describe(p);
            Trial t;
            t.measure = [=] {
              std::lock_guard lock(log_mu);
              run_log.push_back(key);
              return 0.2 + 0.8 / threads;
            };
            return t;
          },
  });
  register_experiment({
      .id = "test/runner_unavailable",
      .chapter = "98-runner-test",
      .title = "an experiment this machine cannot run",
      .axes = {{"variant", {"a"}}},
      .prepare = [](const Params&, GroupCache&) -> Trial {
        throw std::logic_error("an unavailable experiment was prepared");
      },
      .unavailable = [] { return std::string("needs a device this test does not have"); },
  });
  register_experiment({
      .id = "test/runner_validation",
      .chapter = "98-runner-test",
      .title = "validation outcomes",
      .axes = {{"variant",
                {"ok", "wrong_before", "wrong_after", "throws", "prepare_throws", "not_finite",
                 "throws_int"}}},
      .ceiling = Ceiling::mem_bandwidth,
      .prepare =
          [](const Params& p, GroupCache&) {
            const std::string v = p.at("variant");
            if (v == "prepare_throws") throw std::runtime_error("cannot allocate the input");
            if (v == "not_finite") {
              Trial nan;
              nan.measure = [] { return std::numeric_limits<double>::quiet_NaN(); };
              return nan;
            }
            if (v == "throws_int") {
              Trial odd;
              odd.run = [] { throw 42; };
              return odd;
            }
            auto runs = std::make_shared<int>(0);
            Trial t;
            t.run = [=] {
              if (v == "throws" && *runs == 2) throw std::runtime_error("boom");
              ++*runs;
            };
            t.check = [=]() -> std::string {
              if (v == "wrong_before") return "wrong from the start";
              if (v == "wrong_after" && *runs > 1) return "drifted";
              return "";
            };
            t.work = {1000, 8000, 0};
            return t;
          },
  });
  return true;
}();

}  // namespace

// An experiment that says it cannot run here is named with its reason; the others are not.
TEST(Runner, UnavailableExperimentsAreNamedWithTheirReason) {
  const Experiment* gone = find_experiment("test/runner_unavailable");
  const Experiment* here = find_experiment("test/runner_amdahl");
  ASSERT_NE(gone, nullptr);
  ASSERT_NE(here, nullptr);
  const auto skipped = unavailable_here({here, gone});
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].first, gone);
  EXPECT_EQ(skipped[0].second, "needs a device this test does not have");
  EXPECT_TRUE(unavailable_here({here}).empty());
}

TEST(Runner, ExpandsTheProfileAxes) {
  RunOptions quick;
  EXPECT_EQ(configs_of("test/runner_amdahl", quick).size(), 2u * 2u * 1u);
  RunOptions full;
  full.profile = Profile::full;
  EXPECT_EQ(configs_of("test/runner_amdahl", full).size(), 2u * 3u * 2u);
}

TEST(Runner, ThreadsAndSetOverrideAxes) {
  RunOptions opt;
  opt.threads = std::vector<std::string>{"1", "8"};
  opt.set["n"] = {"1K", "2K", "4K"};
  const auto c = configs_of("test/runner_amdahl", opt);
  EXPECT_EQ(c.size(), 2u * 2u * 3u);
  EXPECT_TRUE(std::any_of(c.begin(), c.end(),
                          [](const Config& x) { return x.params.at("threads") == "8"; }));
}

TEST(Runner, BadOverridesAreUsageErrors) {
  RunOptions opt;
  opt.set["nope"] = {"1"};
  EXPECT_THROW(configs_of("test/runner_amdahl", opt), UsageError);
  RunOptions overflow;
  overflow.set["n"] = {"99999999999999999999"};
  EXPECT_THROW(configs_of("test/runner_amdahl", overflow), UsageError);
  RunOptions zero;
  zero.threads = std::vector<std::string>{"0"};
  EXPECT_THROW(configs_of("test/runner_amdahl", zero), UsageError);
}

TEST(Runner, AnAxisMaxIsAUsageErrorNamingTheLimit) {
  RunOptions at_max;
  at_max.set["n"] = {"1M"};
  EXPECT_EQ(configs_of("test/runner_amdahl", at_max).size(), 2u * 2u);
  RunOptions over;
  over.set["n"] = {"1M", "1048577"};
  try {
    configs_of("test/runner_amdahl", over);
    ADD_FAILURE() << "n above the axis max was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "parameter 'n': '1048577' is more than 1048576, the most this "
                 "experiment takes");
  }
}

TEST(Runner, RepetitionsAreInterleavedRoundRobinWithinAGroup) {
  run_log.clear();
  inputs_built = 0;
  RunOptions opt;
  opt.progress = false;
  opt.set["n"] = {"100", "200"};  // two groups of 2 variants x 2 thread counts
  const auto configs = configs_of("test/runner_amdahl", opt);
  const auto records = run_configs(configs, opt, {});
  ASSERT_EQ(records.size(), 8u);
  EXPECT_EQ(inputs_built.load(), 2);  // one shared input per group, not per configuration
  // Per group: 4 warm-up/check runs, then 4 repetitions x 4 configurations.
  ASSERT_EQ(run_log.size(), 2u * (4 + 4 * 4));
  for (int g = 0; g < 2; ++g) {
    const auto begin = run_log.begin() + g * 20 + 4;
    std::vector<std::string> firsts;
    for (int r = 0; r < 4; ++r) {
      std::vector<std::string> rep(begin + r * 4, begin + r * 4 + 4);
      std::sort(rep.begin(), rep.end());
      EXPECT_EQ(std::unique(rep.begin(), rep.end()), rep.end())
          << "a configuration ran twice in one round";
      firsts.push_back(*(begin + r * 4));
    }
    std::sort(firsts.begin(), firsts.end());
    EXPECT_EQ(std::unique(firsts.begin(), firsts.end()), firsts.end())
        << "the same configuration always went first";
  }
  for (const Record& r : records) EXPECT_EQ(r.samples.size(), 4u);
}

TEST(Runner, DerivesSpeedupEfficiencyAndKarpFlatt) {
  RunOptions opt;
  opt.progress = false;
  opt.profile = Profile::full;
  const auto records = run_configs(configs_of("test/runner_amdahl", opt), opt, {});
  for (const Record& r : records) {
    ASSERT_TRUE(r.valid) << r.validation;
    const double p = std::stod(r.params.at("threads"));
    const double s = 1.0 / (0.2 + 0.8 / p);
    EXPECT_NEAR(r.derived.at("speedup"), s, 1e-12);
    if (p > 1) {
      EXPECT_NEAR(r.derived.at("efficiency"), s / p, 1e-12);
      EXPECT_NEAR(r.derived.at("karp_flatt"), 0.2, 1e-12);
    }
  }
}

TEST(Runner, ValidationBeforeAndAfterTiming) {
  RunOptions opt;
  opt.progress = false;
  opt.repeat = 3;
  Calibration calib;
  calib.mem_bandwidth_bytes_per_s = 1e9;
  const auto records = run_configs(configs_of("test/runner_validation", opt), opt, calib);
  std::map<std::string, const Record*> by;
  for (const Record& r : records) by[r.params.at("variant")] = &r;
  EXPECT_TRUE(by["ok"]->valid);
  EXPECT_EQ(by["ok"]->samples.size(), 3u);
  EXPECT_GT(by["ok"]->derived.at("items_per_s"), 0);
  EXPECT_GT(by["ok"]->derived.at("bytes_per_s"), 0);
  EXPECT_FALSE(by["wrong_before"]->valid);
  EXPECT_TRUE(by["wrong_before"]->samples.empty()) << "a wrong configuration was timed";
  EXPECT_NE(by["wrong_before"]->validation.find("before timing"), std::string::npos);
  EXPECT_FALSE(by["wrong_after"]->valid);
  EXPECT_NE(by["wrong_after"]->validation.find("after timing"), std::string::npos);
  EXPECT_FALSE(by["throws"]->valid);
  EXPECT_NE(by["throws"]->validation.find("boom"), std::string::npos);
  // The reason prepare failed reaches the record.
  EXPECT_FALSE(by["prepare_throws"]->valid);
  EXPECT_EQ(by["prepare_throws"]->validation, "prepare failed: cannot allocate the input");
  // A NaN measurement is a failure, never a sample (it would poison statistics and JSON).
  EXPECT_FALSE(by["not_finite"]->valid);
  EXPECT_TRUE(by["not_finite"]->samples.empty());
  EXPECT_FALSE(by["throws_int"]->valid);
  // bytes/s against the calibrated bandwidth (1 GB/s here).
  EXPECT_DOUBLE_EQ(by["ok"]->derived.at("fraction_of_ceiling"),
                   by["ok"]->derived.at("bytes_per_s") / 1e9);
}

TEST(Runner, ThreadCountsGoBeyondTheCoresButNeverAssumeTwo) {
  const auto t = thread_counts();
  EXPECT_EQ(t.front(), "1");
  EXPECT_GE(std::stoi(t.back()), 8);
  EXPECT_NE(std::find(t.begin(), t.end(), std::to_string(hardware_threads())), t.end());
  const auto c = thread_counts_up_to_cores();
  EXPECT_EQ(std::stoi(c.back()), static_cast<int>(hardware_threads()));
}

namespace {
const bool registered_intensity = [] {
  register_experiment({
      .id = "test/runner_intensity",
      .chapter = "98-runner-test",
      .title = "declared FLOPs and bytes",
      .axes = {{"variant", {"kernel"}}},
      .prepare =
          [](const Params&, GroupCache&) {
            Trial t;
            t.run = [] {};
            t.work = {.items = 0, .bytes = 400, .flops = 1000};
            return t;
          },
  });
  return true;
}();
}  // namespace

TEST(Runner, DeclaredFlopsAndBytesGiveTheArithmeticIntensity) {
  RunOptions opt;
  opt.progress = false;
  opt.repeat = 2;
  const auto records = run_configs(configs_of("test/runner_intensity", opt), opt, {});
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(records[0].valid) << records[0].validation;
  EXPECT_DOUBLE_EQ(records[0].derived.at("intensity"), 2.5);
  EXPECT_GT(records[0].derived.at("flops_per_s"), 0);
}

namespace {
// A calibration experiment (chapter 00-calibration, with a ceiling) whose times are scripted per
// take: the runner measures its group again until the figure (best bytes/s) agrees in two
// consecutive takes. One warm-up and two timed runs per take; each variant its own group.
std::map<std::string, int> calib_calls;
const std::map<std::string, std::vector<double>> calib_script = {
    {"settles", {1.0, 1.5, 1.52}},         // the first take disturbed; the 2nd and 3rd agree
    {"quiet", {1.0, 1.01}},                // agrees at once
    {"unsettled", {1.0, 1.5, 1.1, 1.6}}};  // never two in a row within 5%
const bool registered_calibration = [] {
  register_experiment({
      .id = "test/runner_calibration_takes",
      .chapter = kCalibrationChapter,
      .title = "scripted calibration takes (harness_tests only)",
      .axes = {{"variant", {"settles", "quiet", "unsettled"}}},
      .ceiling = Ceiling::mem_bandwidth,
      .interleave = {},
      .repetitions = 2,
      .prepare =
          [](const Params& p, GroupCache&) {
            const std::string v = p.at("variant");
            Trial t;
            t.measure = [v] {
              const int take = calib_calls[v]++ / 3;  // 1 warm-up + 2 timed runs per take
              return calib_script.at(v).at(static_cast<std::size_t>(take));
            };
            t.work = {0, 1e9, 0};
            return t;
          },
  });
  return true;
}();
}  // namespace

TEST(Runner, ACalibrationGroupIsTakenAgainUntilTwoTakesAgree) {
  calib_calls.clear();
  RunOptions opt;
  opt.progress = false;
  const auto records = run_configs(configs_of("test/runner_calibration_takes", opt), opt, {});
  std::map<std::string, const Record*> by;
  for (const Record& r : records) by[r.params.at("variant")] = &r;
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ(calib_calls["quiet"], 2 * 3);
  EXPECT_EQ(calib_calls["settles"], 3 * 3);
  EXPECT_EQ(calib_calls["unsettled"], 4 * 3);
  for (const auto& [v, r] : by) {
    ASSERT_TRUE(r->valid) << v << ": " << r->validation;
    EXPECT_EQ(r->samples.size(), 2u) << v << ": one take's samples, not every take's";
  }
  // The better take of the agreeing pair (the faster one); of all takes when none agreed.
  EXPECT_DOUBLE_EQ(by["quiet"]->stats.median, 1.0);
  EXPECT_DOUBLE_EQ(by["settles"]->stats.median, 1.5);
  EXPECT_DOUBLE_EQ(by["unsettled"]->stats.median, 1.0);
  EXPECT_FALSE(by["quiet"]->notes.count("unstable"));
  EXPECT_FALSE(by["settles"]->notes.count("unstable"));
  ASSERT_TRUE(by["unsettled"]->notes.count("unstable"));
  EXPECT_EQ(by["unsettled"]->notes.at("unstable"),
            "memory bandwidth: takes 1e+09, 6.67e+08, 9.09e+08, 6.25e+08 disagree by more than "
            "5%; the best take of each configuration is kept");
  const Calibration c = calibration_from_records(records);
  ASSERT_TRUE(c.detail.contains("unstable")) << c.detail.dump();
  EXPECT_EQ(c.detail["unstable"].size(), 1u);
}

TEST(Registry, AFigureMayNameADerivedMetricAsXButNotAnUnknownName) {
  Experiment ok{.id = "test/registry_derived_x", .chapter = "98-runner-test", .title = "x"};
  ok.axes = {{"variant", {"a"}}};
  ok.prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; };
  ok.derived = {"elapsed_s"};
  ok.figures = {{.id = "roof", .x = "intensity", .y = "flops_per_s"},
                {.id = "curve", .x = "elapsed_s"}};
  EXPECT_NO_THROW(register_experiment(ok));
  Experiment bad = ok;
  bad.id = "test/registry_unknown_x";
  bad.figures = {{.id = "typo", .x = "elapsed"}};
  EXPECT_THROW(register_experiment(bad), std::logic_error);
  Experiment recorded{.id = "test/registry_recorded", .chapter = "98-runner-test", .title = "r"};
  recorded.recorded_by = "train";  // no prepare: a command writes its records
  EXPECT_NO_THROW(register_experiment(recorded));
  Experiment neither = recorded;
  neither.id = "test/registry_no_prepare";
  neither.recorded_by.clear();
  EXPECT_THROW(register_experiment(neither), std::logic_error);
}

TEST(Registry, AnAxisMaxMustHoldForTheDeclaredValuesAndNeedsAnIntegerAxis) {
  Experiment over{.id = "test/registry_max_over", .chapter = "98-runner-test", .title = "m"};
  over.axes = {{"n", {"64", "128"}, {}, AxisKind::size, 100}};
  over.prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; };
  EXPECT_THROW(register_experiment(over), UsageError);  // its own value 128 is over the max
  Experiment text = over;
  text.id = "test/registry_max_text";
  text.axes = {{"variant", {"a"}, {}, AxisKind::text, 100}};
  EXPECT_THROW(register_experiment(text), std::logic_error);
}
