// Charts and reports: a registered demo experiment, hand-made records shaped by Amdahl's law
// (serial fractions known in advance), and the files the report leaves behind.
// Set CONCURDL_KEEP_TEST_OUTPUT=1 to keep the temporary report directories for a look.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"
#include "report_demo.hpp"
#include "report_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using namespace report_test;
using namespace concurdl;

// Weak scaling and a compute ceiling, for the overlays the demo does not draw.
constexpr const char* kWeakId = "test/report_weak";
void register_weak() {
  static const bool registered = register_experiment({
      .id = kWeakId,
      .chapter = "99-test",
      .title = "Report weak scaling",
      .axes = {{.name = "variant", .values = {"fma"}},
               {.name = "threads", .values = {"1", "2", "4"}, .kind = AxisKind::count}},
      .baseline = {{"threads", "1"}},
      .prepare =
          [](const Params&, GroupCache&) {
            return Trial{.run = [] {}, .check = [] { return std::string(); }};
          },
      .figures = {{.id = "scaled_speedup",
                   .kind = FigureKind::speedup,
                   .overlays = {Overlay::ideal, Overlay::gustafson}},
                  {.id = "flops",
                   .title = "FLOP/s",
                   .y = "flops_per_s",
                   .overlays = {Overlay::flops_ceiling}}},
  });
  (void)registered;
}

TEST(ReportCharts, SpeedupChartHasIdealLineAndAmdahlFitOnTheCores) {
  register_demo();
  const auto charts = build_charts({demo_run("alpha")});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->kind, FigureKind::speedup);
  EXPECT_EQ(c->x_label, "threads");
  EXPECT_EQ(c->y_label, "speedup (×)");

  const ChartSeries* v2 = find_series(*c, "v2_padded");
  ASSERT_NE(v2, nullptr);
  EXPECT_FALSE(v2->is_model);
  ASSERT_EQ(v2->points.size(), 4u);
  EXPECT_DOUBLE_EQ(v2->points[0].x, 1);
  EXPECT_DOUBLE_EQ(v2->points[3].x, 8);
  EXPECT_NEAR(v2->points[2].y, amdahl_speedup(kSerialV2, 4), 1e-9);
  // The speedup's error bar is the time's CI mapped through S = T1 / T.
  EXPECT_LT(v2->points[2].lo, v2->points[2].y);
  EXPECT_GT(v2->points[2].hi, v2->points[2].y);

  const ChartSeries* ideal = find_series(*c, "ideal (S = p)");
  ASSERT_NE(ideal, nullptr);
  EXPECT_TRUE(ideal->is_model);
  EXPECT_DOUBLE_EQ(ideal->points.front().y, 1);
  EXPECT_DOUBLE_EQ(ideal->points.back().y, 8);

  // Measured series come before the models, and the fits carry f in their legend.
  bool seen_model = false;
  double f1 = -1, f2 = -1;
  for (const auto& s : c->series) {
    if (s.is_model) seen_model = true;
    EXPECT_TRUE(s.is_model || !seen_model) << s.label << " after a model";
    if (s.is_model && f1 < 0) f1 = legend_f(s.label, "v1_naive");
    if (s.is_model && f2 < 0) f2 = legend_f(s.label, "v2_padded");
  }
  EXPECT_NEAR(f1, kSerialV1, 0.002);
  EXPECT_NEAR(f2, kSerialV2, 0.002);

  std::string notes;
  for (const auto& n : c->notes) notes += n + "\n";
  EXPECT_NE(notes.find("p <= 4"), std::string::npos) << notes;
  EXPECT_NE(notes.find("oversubscribed"), std::string::npos) << notes;
  EXPECT_NE(notes.find("Karp–Flatt"), std::string::npos) << notes;
}

TEST(ReportCharts, WithoutACoreCountTheFitUsesEveryPoint) {
  register_demo();
  RunFile run = demo_run("alpha");
  run.provenance.erase("cores");
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  double f2 = -1;
  for (const auto& s : c->series)
    if (s.is_model && f2 < 0) f2 = legend_f(s.label, "v2_padded");
  // The oversubscribed point drags the fitted fraction well above the true one.
  EXPECT_GT(f2, kSerialV2 + 0.01);
}

TEST(ReportCharts, OtherVaryingParametersAreFoldedIntoTheLabel) {
  register_demo();
  const auto charts = build_charts({demo_run("alpha")});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup_all_n");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(find_series(*c, "v1_naive, n=1048576"), nullptr);
  EXPECT_NE(find_series(*c, "v1_naive, n=1024"), nullptr);
  EXPECT_NE(find_series(*c, "v2_padded, n=32768"), nullptr);
  EXPECT_EQ(find_series(*c, "v1_naive"), nullptr);
}

TEST(ReportCharts, BarsAreCategoriesWithTheirCI) {
  register_demo();
  const auto charts = build_charts({demo_run("alpha")});
  const ChartSpec* c = find_chart(charts, "test_report_demo_time_bars");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->y_label, "time (s)");
  const ChartSeries* s = find_series(*c, "threads=2");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->points.size(), 2u);
  EXPECT_EQ(s->points[0].x_label, "v1_naive");
  EXPECT_DOUBLE_EQ(s->points[0].x, 0);
  EXPECT_EQ(s->points[1].x_label, "v2_padded");
  EXPECT_DOUBLE_EQ(s->points[1].x, 1);
  EXPECT_LT(s->points[0].lo, s->points[0].y);
}

TEST(ReportCharts, CeilingOverlayIsTheCalibratedBandwidth) {
  register_demo();
  const auto charts = build_charts({demo_run("alpha")});
  const ChartSpec* c = find_chart(charts, "test_report_demo_bandwidth_vs_n");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->log_x);
  EXPECT_TRUE(c->log_y);
  EXPECT_EQ(c->y_label, "bytes/s");
  const ChartSeries* ceiling = find_series(*c, "measured memory bandwidth (calibrate)");
  ASSERT_NE(ceiling, nullptr);
  EXPECT_TRUE(ceiling->is_model);
  EXPECT_DOUBLE_EQ(ceiling->points.front().y, 2e10);

  RunFile uncalibrated = demo_run("alpha");
  uncalibrated.calibration = {};
  const auto charts2 = build_charts({uncalibrated});
  const ChartSpec* c2 = find_chart(charts2, "test_report_demo_bandwidth_vs_n");
  ASSERT_NE(c2, nullptr);
  EXPECT_EQ(find_series(*c2, "measured memory bandwidth (calibrate)"), nullptr);
}

TEST(ReportCharts, InvalidRecordsAreLeftOutAndSaidSo) {
  register_demo();
  RunFile run = demo_run("alpha");
  for (auto& r : run.records)
    if (r.params["variant"] == "v1_naive" && r.params["threads"] == "2") {
      r.valid = false;
      r.validation = "sum differs from the reference";
    }
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  const ChartSeries* v1 = find_series(*c, "v1_naive");
  ASSERT_NE(v1, nullptr);
  EXPECT_EQ(v1->points.size(), 3u);
  for (const auto& p : v1->points) EXPECT_NE(p.x, 2);
  ASSERT_FALSE(c->notes.empty());
  EXPECT_NE(c->notes.front().find("invalid"), std::string::npos);
}

TEST(ReportCharts, AConfigurationMeasuredTwiceInOneRunIsASecondSeries) {
  register_demo();
  RunFile run = demo_run("alpha");
  const auto first = run.records;
  for (const auto& r : first)
    if (r.params.at("variant") == "v1_naive") run.records.push_back(r);
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  const ChartSeries* once = find_series(*c, "v1_naive");
  const ChartSeries* twice = find_series(*c, "v1_naive (repeat 2)");
  ASSERT_NE(once, nullptr);
  ASSERT_NE(twice, nullptr);
  EXPECT_EQ(once->points.size(), 4u);
  EXPECT_EQ(twice->points.size(), 4u);
}

// Merged runs name their series by machine: its CPU's microarchitecture and the CPUs it had.
TEST(ReportCharts, SeveralMachinesPrefixEachSeriesWithTheirCpu) {
  register_demo();
  RunFile zen = demo_run("alpha"), emr = demo_run("beta");
  zen.provenance["cpu"] = {{"family", 26}, {"model", 2}, {"microarchitecture", "Zen 5"}};
  emr.provenance["cpu"] = {{"family", 6}, {"model", 207}, {"microarchitecture", "Emerald Rapids"}};
  const auto charts = build_charts({zen, emr});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(find_series(*c, "Zen 5, 4 CPUs: v1_naive"), nullptr);
  EXPECT_NE(find_series(*c, "Emerald Rapids, 4 CPUs: v1_naive"), nullptr);
  EXPECT_NE(find_series(*c, "Emerald Rapids, 4 CPUs: v2_padded"), nullptr);
  // One fit per measured series, per machine.
  int fits = 0;
  for (const auto& s : c->series) fits += s.label.rfind("Amdahl fit", 0) == 0;
  EXPECT_EQ(fits, 4);
}

// Two hosts of one kind of machine are told apart by host; two runs on one host by directory;
// a name the user gives (concurdl report --label) stands as given.
TEST(ReportCharts, RunsOfOneMachineAreToldApartByHostThenDirectory) {
  register_demo();
  auto labels_of = [](const std::vector<RunFile>& runs) {
    const auto charts = build_charts(runs);
    const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
    std::vector<std::string> out;
    if (c)
      for (const auto& s : c->series)
        if (s.label.rfind("Amdahl", 0) != 0 && s.label.find(": v1_naive") != std::string::npos)
          out.push_back(s.label);
    return out;
  };
  EXPECT_EQ(labels_of({demo_run("alpha"), demo_run("beta")}),
            (std::vector<std::string>{"Demo CPU @ 3 GHz, 4 CPUs (alpha): v1_naive",
                                      "Demo CPU @ 3 GHz, 4 CPUs (beta): v1_naive"}));
  EXPECT_EQ(labels_of({demo_run("alpha", "run-monday"), demo_run("alpha", "run-tuesday")}),
            (std::vector<std::string>{"Demo CPU @ 3 GHz, 4 CPUs (run-monday): v1_naive",
                                      "Demo CPU @ 3 GHz, 4 CPUs (run-tuesday): v1_naive"}));
  RunFile mine = demo_run("alpha", "run-monday");
  mine.label = "lab A";
  EXPECT_EQ(labels_of({mine, demo_run("alpha", "run-tuesday")}),
            (std::vector<std::string>{"lab A: v1_naive", "Demo CPU @ 3 GHz, 4 CPUs: v1_naive"}));
}

TEST(ReportCharts, GustafsonAndComputeCeilingOverlays) {
  register_weak();
  RunFile run = demo_run("alpha");
  run.records.clear();
  for (int p : {1, 2, 4}) {
    Record r = make_record("fma", p, 1000, 0.01 * (kSerialV2 + (1 - kSerialV2) / p));
    r.experiment = kWeakId;
    r.params.erase("n");
    r.derived["speedup"] = 1 / (kSerialV2 + (1 - kSerialV2) / p);
    r.derived["flops_per_s"] = 2e9 * p;
    run.records.push_back(r);
  }
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "test_report_weak_scaled_speedup");
  ASSERT_NE(c, nullptr);
  // No title declared: the experiment's, with the figure id.
  EXPECT_EQ(c->title, "Report weak scaling (scaled_speedup)");
  EXPECT_NE(find_series(*c, "ideal (S = p)"), nullptr);
  const ChartSeries* g = find_series(*c, "Gustafson, Amdahl-fitted f (fma): f = 0.05");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->is_model);
  EXPECT_NEAR(g->points.back().y, gustafson_speedup(kSerialV2, 4), 1e-9);

  const ChartSpec* f = find_chart(charts, "test_report_weak_flops");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->y_label, "FLOP/s");
  const ChartSeries* ceiling = find_series(*f, "measured peak FLOP/s, all cores (calibrate)");
  ASSERT_NE(ceiling, nullptr);
  EXPECT_DOUBLE_EQ(ceiling->points.front().y, 1e11);
}

// A roofline (x = the derived arithmetic intensity) and a training curve (x = elapsed time, a
// derived metric, with the epoch varying along it).
constexpr const char* kRoofId = "test/report_roofline";
constexpr const char* kCurveId = "test/report_curve";
void register_roofline_and_curve() {
  static const bool registered = [] {
    register_experiment({
        .id = kRoofId,
        .chapter = "99-test",
        .title = "Report roofline",
        .axes = {{.name = "variant", .values = {"v1", "v2"}},
                 {.name = "n", .values = {"64", "1024"}, .kind = AxisKind::size}},
        .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
        .figures = {{.id = "roofline",
                     .x = "intensity",
                     .y = "flops_per_s",
                     .log_x = true,
                     .log_y = true,
                     .overlays = {Overlay::roofline},
                     .along_x = {"n"}}},
    });
    register_experiment({
        .id = kCurveId,
        .chapter = "99-test",
        .title = "Report curve",
        .axes = {{.name = "arch", .values = {"4-3-2"}},
                 {.name = "epoch", .values = {"0"}, .kind = AxisKind::integer}},
        .metric = "test_accuracy",
        .unit = "fraction",
        .lower_is_better = false,
        .figures = {{.id = "vs_time", .x = "elapsed_s", .series = "arch", .along_x = {"epoch"}},
                    {.id = "vs_epoch", .x = "epoch", .y = "test_loss", .series = "arch"}},
        .derived = {"elapsed_s", "test_loss"},
        .recorded_by = "test",
    });
    return true;
  }();
  (void)registered;
}

TEST(ReportCharts, RooflineIsTheMinimumOfTheCalibratedCeilingsOverIntensity) {
  register_roofline_and_curve();
  RunFile run = demo_run("alpha");  // calibrated: 20 GB/s, 100 GFLOP/s (ridge at 5 FLOP/byte)
  run.records.clear();
  for (const char* v : {"v1", "v2"})
    for (double n : {64.0, 1024.0}) {
      Record r = make_record(v, 1, static_cast<long>(n), 1.0);
      r.experiment = kRoofId;
      r.params = {{"variant", v}, {"n", fmt::format("{}", n)}};
      r.derived = {{"intensity", n / 6}, {"flops_per_s", (v[1] == '1' ? 1e9 : 5e10) * n / 1024}};
      run.records.push_back(r);
    }
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "test_report_roofline_roofline");
  ASSERT_NE(c, nullptr);
  const ChartSeries* v2 = find_series(*c, "v2");
  ASSERT_NE(v2, nullptr);
  ASSERT_EQ(v2->points.size(), 2u);
  EXPECT_NEAR(v2->points.front().x, 64.0 / 6, 1e-9);  // x is the intensity, sorted
  EXPECT_NEAR(v2->points.back().x, 1024.0 / 6, 1e-9);
  const ChartSeries* roof = nullptr;
  for (const auto& s : c->series)
    if (s.is_model && s.label.rfind("roofline", 0) == 0) roof = &s;
  ASSERT_NE(roof, nullptr);
  bool has_ridge = false;
  for (const auto& p : roof->points) {
    EXPECT_NEAR(p.y, std::min(1e11, p.x * 2e10), 1e-6 * p.y);
    has_ridge = has_ridge || std::abs(p.x - 5.0) < 1e-12;
  }
  EXPECT_TRUE(has_ridge);
  EXPECT_LE(roof->points.front().x, 5.0 / 4 + 1e-12);  // spans the ridge even left of the data
  // Without a calibration there is no roof, and the chart says why.
  RunFile bare = run;
  bare.calibration = {};
  const auto c2 = build_charts({bare});
  const ChartSpec* b = find_chart(c2, "test_report_roofline_roofline");
  ASSERT_NE(b, nullptr);
  for (const auto& s : b->series) EXPECT_FALSE(s.is_model);
  EXPECT_NE(fmt::format("{}", fmt::join(b->notes, " ")).find("no calibration"), std::string::npos);
}

TEST(ReportCharts, ADerivedXWithTheEpochAlongItIsOneCurve) {
  register_roofline_and_curve();
  RunFile run = demo_run("alpha");
  run.records.clear();
  for (int epoch = 0; epoch <= 3; ++epoch) {
    Record r;
    r.experiment = kCurveId;
    r.chapter = "99-test";
    r.params = {{"arch", "4-3-2"}, {"epoch", std::to_string(epoch)}};
    r.metric = "test_accuracy";
    r.lower_is_better = false;
    r.samples = {0.1 + 0.2 * epoch};
    r.stats = summarize(r.samples);
    r.derived = {{"elapsed_s", 1.5 * epoch}, {"test_loss", 2.3 - 0.5 * epoch}};
    run.records.push_back(r);
  }
  const auto charts = build_charts({run});
  const ChartSpec* t = find_chart(charts, "test_report_curve_vs_time");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->series.size(), 1u);  // not one series per epoch
  EXPECT_EQ(t->series[0].label, "4-3-2");
  ASSERT_EQ(t->series[0].points.size(), 4u);
  EXPECT_DOUBLE_EQ(t->series[0].points[3].x, 4.5);
  EXPECT_DOUBLE_EQ(t->series[0].points[3].y, 0.7);
  const ChartSpec* e = find_chart(charts, "test_report_curve_vs_epoch");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->series.size(), 1u);
  EXPECT_DOUBLE_EQ(e->series[0].points[1].y, 1.8);
}

TEST(ReportCharts, UnregisteredExperimentsHaveNoCharts) {
  RunFile run;
  run.records.push_back(make_record("v1", 1, 10, 1.0));
  run.records.back().experiment = "test/never_registered";
  EXPECT_TRUE(build_charts({run}).empty());
}

}  // namespace
