// The runner's ceilings and rooflines: a device's roofline (Trial::bound) and its impossible
// figures, the FMA peak of a record's workers (Ceiling::peak_flops_per_worker) or its own
// measured peak, and a CPU roofline per record on its threads (Ceiling::roofline_per_worker).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "concurdl/harness/runner.hpp"
#include "runner_test_util.hpp"

using namespace concurdl;
using concurdl::test::configs_of;

namespace {
// Trials with a roofline (Trial::bound): 1e9 bytes and 1e9 FLOPs in a simulated second each
// repetition, under rates that allow it, allow it within the margin, or do not.
const bool registered_roofline = [] {
  register_experiment({
      .id = "test/runner_roofline",
      .chapter = "98-runner-test",
      .title = "a roofline and the impossible",
      .axes = {{"variant", {"possible", "within_margin", "impossible", "flops_bound"}}},
      .repetitions = 3,
      .prepare =
          [](const Params& p, GroupCache&) {
            const std::string v = p.at("variant");
            Trial t;
            t.measure = [] { return 1.0; };
            t.work = {0, 1e9, 1e9};
            if (v == "possible") t.bound = {2e9, 0, "a test device"};
            if (v == "within_margin") t.bound = {1e9 / 1.05, 0, "a test device"};
            if (v == "impossible") t.bound = {1e8, 0, "a test device"};
            if (v == "flops_bound") t.bound = {4e9, 1e8, "a test device"};
            return t;
          },
  });
  return true;
}();
}  // namespace

// A record carries its roofline time and the fraction of it reached; a time the roofline does
// not allow (beyond the 10% margin) is impossible and the configuration fails, saying why.
TEST(Runner, ARooflineBoundsTheTimeAndTheImpossibleFails) {
  RunOptions opt;
  opt.progress = false;
  const auto records = run_configs(configs_of("test/runner_roofline", opt), opt, {});
  ASSERT_EQ(records.size(), 4u);
  std::map<std::string, const Record*> by;
  for (const Record& r : records) by[r.params.at("variant")] = &r;
  const Record& possible = *by.at("possible");
  ASSERT_TRUE(possible.valid) << possible.validation;
  EXPECT_DOUBLE_EQ(possible.derived.at("roofline_time_s"), 0.5);
  EXPECT_DOUBLE_EQ(possible.derived.at("fraction_of_roofline"), 0.5);
  EXPECT_EQ(possible.notes.at("roofline"), "a test device");
  const Record& margin = *by.at("within_margin");
  ASSERT_TRUE(margin.valid) << margin.validation;
  EXPECT_NEAR(margin.derived.at("fraction_of_roofline"), 1.05, 1e-12);
  const Record& impossible = *by.at("impossible");
  EXPECT_FALSE(impossible.valid);
  EXPECT_NE(impossible.validation.find("impossible"), std::string::npos) << impossible.validation;
  EXPECT_NE(impossible.validation.find("a test device"), std::string::npos);
  // The longer of the two terms: 1e9 FLOPs at 1e8 FLOP/s (10 s) over 1e9 bytes at 4e9 (0.25 s).
  const Record& flops = *by.at("flops_bound");
  EXPECT_FALSE(flops.valid);
  EXPECT_DOUBLE_EQ(roofline_time({0, 1e9, 1e9}, {4e9, 1e8, ""}), 10.0);
  EXPECT_DOUBLE_EQ(roofline_time({0, 1e9, 0}, {4e9, 1e8, ""}), 0.25);
  EXPECT_DOUBLE_EQ(roofline_time({0, 1e9, 1e9}, {}), 0.0);  // no rates, no bound
}

namespace {
const bool registered_per_worker = [] {
  register_experiment({
      .id = "test/runner_peak_per_worker",
      .chapter = "98-runner-test",
      .title = "FLOP/s against the peak of the record's threads",
      .axes = {{"threads", {"1", "2", "4"}, {}, AxisKind::count}},
      .ceiling = Ceiling::peak_flops_per_worker,
      .prepare =
          [](const Params&, GroupCache&) {
            Trial t;
            t.measure = [] { return 1.0; };
            t.work = {0, 0, 1e9};
            return t;
          },
  });
  return true;
}();
}  // namespace

namespace {
// One second a run; 2e9 bytes and 3e9 FLOPs declared. `own` yes: the trial measured its own
// arithmetic's peak on its threads (6e9 FLOP/s a thread), as a bfloat16 GEMM phase does.
const bool registered_cpu_roofline = [] {
  register_experiment({
      .id = "test/runner_roofline_per_worker",
      .chapter = "98-runner-test",
      .title = "A CPU roofline per record, on its own threads",
      .axes = {{"threads", {"1", "2", "4"}, {}, AxisKind::count}, {"own", {"no", "yes"}}},
      .metrics = {{.name = "own_peak_flops", .unit = "FLOP/s", .optional = true}},
      .ceiling = Ceiling::roofline_per_worker,
      .prepare =
          [](const Params& p, GroupCache&) {
            Trial t;
            const bool own = p.at("own") == "yes";
            const double threads = static_cast<double>(param_int(p, "threads"));
            t.measure = [own, threads] {
              Sample s(1.0);
              if (own) s.metrics["own_peak_flops"] = 6e9 * threads;
              return s;
            };
            t.work = {0, 2e9, 3e9};
            return t;
          },
  });
  return true;
}();
}  // namespace

// Ceiling::roofline_per_worker: the longer of the bytes at the copy bandwidth of the record's
// threads and the FLOPs at their FMA peak (or at the record's own measured peak); where the
// calibration has no figure for its threads, no roofline. A record faster than it (its bytes in
// a cache) stays valid and says so.
TEST(Runner, ACpuRooflineTakesTheRecordsThreadsAndItsOwnPeak) {
  RunOptions opt;
  opt.progress = false;
  opt.repeat = 2;
  Calibration calib;
  calib.peak_flops_1core = 2e9;
  calib.peak_flops = 4e9;
  calib.detail = {{"mem_copy_bytes_per_s_by_threads", {{"1", 4e9}, {"2", 8e9}}},
                  {"fma_flops_per_s_by_threads", {{"1", 2e9}, {"2", 4e9}}}};
  std::vector<Record> records =
      run_configs(configs_of("test/runner_roofline_per_worker", opt), opt, calib);
  ASSERT_EQ(records.size(), 6u);
  std::map<std::string, const Record*> by;
  for (const Record& r : records) by[r.params.at("threads") + r.params.at("own")] = &r;
  // 1 thread: memory 0.5 s, compute 1.5 s at the FMA peak, 0.5 s at its own 6e9.
  EXPECT_DOUBLE_EQ(by["1no"]->derived.at("roofline_time_s"), 1.5);
  EXPECT_DOUBLE_EQ(by["1no"]->derived.at("fraction_of_roofline"), 1.5);
  EXPECT_TRUE(by["1no"]->valid);
  EXPECT_NE(by["1no"]->notes.at("roofline").find("faster than this roofline"), std::string::npos);
  EXPECT_DOUBLE_EQ(by["1yes"]->derived.at("roofline_time_s"), 0.5);
  // 2 threads: memory 0.25 s; compute 0.75 s at the FMA peak, 0.25 s at its own 1.2e10.
  EXPECT_DOUBLE_EQ(by["2no"]->derived.at("roofline_time_s"), 0.75);
  EXPECT_EQ(by["2no"]->notes.at("roofline").find("faster"), std::string::npos);
  EXPECT_DOUBLE_EQ(by["2yes"]->derived.at("roofline_time_s"), 0.25);
  // 4 threads: no copy bandwidth calibrated at 4, so no roofline (not the compute side alone).
  EXPECT_EQ(by["4no"]->derived.count("roofline_time_s"), 0u);
  EXPECT_EQ(by["4yes"]->derived.count("roofline_time_s"), 0u);
  EXPECT_EQ(by["4no"]->derived.count("fraction_of_ceiling"), 0u);
}

// Ceiling::peak_flops_per_worker: one core's peak times the threads, at most all cores'.
TEST(Runner, APerWorkerPeakScalesWithTheThreadsUpToAllCores) {
  RunOptions opt;
  opt.progress = false;
  opt.repeat = 2;
  Calibration calib;
  calib.peak_flops_1core = 2e9;
  calib.peak_flops = 5e9;  // 2.5 cores' worth: 4 threads are held to it, not to 8e9
  std::vector<Record> records =
      run_configs(configs_of("test/runner_peak_per_worker", opt), opt, calib);
  ASSERT_EQ(records.size(), 3u);
  std::map<std::string, double> fraction;
  for (const Record& r : records)
    fraction[r.params.at("threads")] = r.derived.at("fraction_of_ceiling");
  EXPECT_DOUBLE_EQ(fraction["1"], 0.5);   // 1e9 FLOP/s of 2e9
  EXPECT_DOUBLE_EQ(fraction["2"], 0.25);  // of 4e9
  EXPECT_DOUBLE_EQ(fraction["4"], 0.2);   // of all cores' 5e9
}

namespace {
// The same ceiling for a record that measured the peak of its own arithmetic (a bfloat16 step's
// VDPBF16PS, 4e9 FLOP/s here): its fraction is of that.
const bool registered_per_worker_own = [] {
  register_experiment({
      .id = "test/runner_peak_per_worker_own",
      .chapter = "98-runner-test",
      .title = "FLOP/s against the peak of the record's own arithmetic",
      .axes = {{"threads", {"1"}, {}, AxisKind::count}, {"own", {"no", "yes"}}},
      .metrics = {{.name = "own_peak_flops", .unit = "FLOP/s", .optional = true}},
      .ceiling = Ceiling::peak_flops_per_worker,
      .prepare =
          [](const Params& p, GroupCache&) {
            Trial t;
            const bool own = p.at("own") == "yes";
            t.measure = [own] {
              Sample s(1.0);
              if (own) s.metrics["own_peak_flops"] = 4e9;
              return s;
            };
            t.work = {0, 0, 1e9};
            return t;
          },
  });
  return true;
}();
}  // namespace

TEST(Runner, APerWorkerPeakGivesWayToTheRecordsOwnPeak) {
  RunOptions opt;
  opt.progress = false;
  opt.repeat = 2;
  Calibration calib;
  calib.peak_flops_1core = 2e9;
  calib.peak_flops = 4e9;
  std::vector<Record> records =
      run_configs(configs_of("test/runner_peak_per_worker_own", opt), opt, calib);
  ASSERT_EQ(records.size(), 2u);
  for (const Record& r : records)
    EXPECT_DOUBLE_EQ(r.derived.at("fraction_of_ceiling"), r.params.at("own") == "yes" ? 0.25 : 0.5)
        << r.params.at("own");
}
