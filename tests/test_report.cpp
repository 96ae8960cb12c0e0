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
#include "report_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using namespace report_test;
using namespace concurdl;

constexpr const char* kId = "test/report_demo";
constexpr double kSerialV1 = 0.2;   // v1_naive's serial fraction
constexpr double kSerialV2 = 0.05;  // v2_padded's
constexpr int kCores = 4;           // the demo machine's: points at p = 8 are oversubscribed
constexpr long kBigN = 1048576;

void register_demo() {
  static const bool registered = register_experiment({
      .id = kId,
      .chapter = "99-test",
      .title = "Report demo",
      .axes = {{.name = "variant", .values = {"v1_naive", "v2_padded"}},
               {.name = "threads", .values = {"1", "2", "4", "8"}, .kind = AxisKind::count},
               {.name = "n", .values = {"1024", "32768", "1048576"}, .kind = AxisKind::size}},
      .baseline = {{"threads", "1"}},
      .prepare =
          [](const Params&, GroupCache&) {
            return Trial{.run = [] {}, .check = [] { return std::string(); }};
          },
      .figures = {{.id = "speedup",
                   .title = "Demo speedup",
                   .kind = FigureKind::speedup,
                   .x = "threads",
                   .y = "speedup",
                   .where = {{"n", "1048576"}}},
                  {.id = "time_bars",
                   .title = "Demo time per variant",
                   .kind = FigureKind::bars,
                   .x = "variant",
                   .series = "threads",
                   .where = {{"n", "1048576"}}},
                  {.id = "bandwidth_vs_n",
                   .title = "Demo bandwidth vs size",
                   .kind = FigureKind::lines,
                   .x = "n",
                   .y = "bytes_per_s",
                   .where = {{"threads", "1"}},
                   .log_x = true,
                   .log_y = true,
                   .overlays = {Overlay::mem_ceiling}},
                  {.id = "speedup_all_n",
                   .title = "Demo speedup, every size",
                   .kind = FigureKind::speedup,
                   .x = "threads",
                   .y = "speedup"}},
  });
  (void)registered;
}

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

Record make_record(const std::string& variant, int threads, long n, double seconds) {
  Record r;
  r.experiment = kId;
  r.chapter = "99-test";
  r.params = {{"variant", variant}, {"threads", std::to_string(threads)}, {"n", std::to_string(n)}};
  // The middle sample is `seconds` itself, so the median is exact.
  for (double k : {0.99, 1.0, 1.01, 0.995, 1.005}) r.samples.push_back(seconds * k);
  r.stats = summarize(r.samples);
  r.derived["items_per_s"] = static_cast<double>(n) / r.stats.median;
  r.derived["bytes_per_s"] = 8.0 * static_cast<double>(n) / r.stats.median;
  return r;
}

// Amdahl-shaped up to the cores; at p = 8 (oversubscribed) slower than at p = 4, which no
// Amdahl curve fits: the fit must leave that point out to find the serial fraction.
RunFile demo_run(const std::string& host, const std::string& dir = "") {
  RunFile run;
  run.concurdl_version = "0.1.0";
  run.command = {"concurdl", "run", "99"};
  run.provenance = {{"host", host},
                    {"cpu_model", "Demo CPU @ 3 GHz"},
                    {"cores", kCores},
                    {"compiler", "GNU 12.2.0"},
                    {"build_type", "Release"},
                    {"git_commit", "0123456789abcdef"},
                    {"git_dirty", true},
                    {"started", "2025-01-01T00:00:00Z"}};
  run.calibration.mem_bandwidth_bytes_per_s = 2e10;
  run.calibration.peak_flops = 1e11;
  run.calibration.peak_flops_1core = 2.5e10;
  run.calibration.thread_copy_bytes_per_s = 8e9;
  run.path = fs::path("/results/runs") / (dir.empty() ? "2025-run-" + host : dir) / "results.json";
  for (const auto& [variant, f, t1] :
       {std::tuple{"v1_naive", kSerialV1, 0.08}, std::tuple{"v2_padded", kSerialV2, 0.05}}) {
    for (int p : {1, 2, 4, 8}) {
      const double tp = p <= kCores ? t1 * (f + (1 - f) / p) : 1.15 * t1 * (f + (1 - f) / kCores);
      Record r = make_record(variant, p, kBigN, tp);
      r.derived["speedup"] = t1 / r.stats.median;
      r.derived["efficiency"] = r.derived["speedup"] / p;
      run.records.push_back(r);
    }
    for (long n : {1024L, 32768L}) {
      Record r = make_record(variant, 1, n, t1 * static_cast<double>(n) / kBigN + 2e-6);
      r.derived["speedup"] = 1;
      r.derived["efficiency"] = 1;
      run.records.push_back(r);
    }
  }
  return run;
}

// The serial fraction in a legend "Amdahl fit (NAME): f = 0.05", or -1.
double legend_f(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex re("Amdahl fit \\(" + name + "\\): f = ([0-9.eE+-]+)");
  return std::regex_search(text, m, re) ? std::stod(m[1]) : -1;
}

// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

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

TEST(ReportCharts, SeveralRunsPrefixEachSeriesWithItsHost) {
  register_demo();
  const auto charts = build_charts({demo_run("alpha"), demo_run("beta")});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(find_series(*c, "alpha: v1_naive"), nullptr);
  EXPECT_NE(find_series(*c, "beta: v1_naive"), nullptr);
  EXPECT_NE(find_series(*c, "beta: v2_padded"), nullptr);
  // One fit per measured series, per machine.
  int fits = 0;
  for (const auto& s : c->series) fits += s.label.rfind("Amdahl fit", 0) == 0;
  EXPECT_EQ(fits, 4);
}

TEST(ReportCharts, RunsOnOneHostAreNamedByTheirDirectory) {
  register_demo();
  const auto charts =
      build_charts({demo_run("alpha", "run-monday"), demo_run("alpha", "run-tuesday")});
  const ChartSpec* c = find_chart(charts, "test_report_demo_speedup");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(find_series(*c, "run-monday: v1_naive"), nullptr);
  EXPECT_NE(find_series(*c, "run-tuesday: v1_naive"), nullptr);
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

TEST(ReportFiles, WritesDataScriptsPicturesAndOneSelfContainedHtml) {
  register_demo();
  TempDir tmp;
  const std::vector<std::string> load_errors = {
      "/results/runs/broken/results.json: not JSON (parse error at byte 17)"};
  const ReportFiles files = write_report({demo_run("alpha")}, load_errors, tmp.path() / "out");
  const bool pictures = gnuplot_available();

  ASSERT_EQ(files.charts.size(), 4u);
  for (const auto& c : files.charts) {
    EXPECT_TRUE(fs::is_regular_file(c.dat)) << c.dat;
    EXPECT_TRUE(fs::is_regular_file(c.gp)) << c.gp;
    EXPECT_EQ(c.dat.parent_path(), tmp.path() / "out" / "figures");
    if (!pictures) continue;
    ASSERT_FALSE(c.svg.empty()) << c.gp;
    ASSERT_FALSE(c.png.empty()) << c.gp;
    EXPECT_GT(fs::file_size(c.svg), 0u);
    EXPECT_GT(fs::file_size(c.png), 0u);
    const std::string png = slurp(c.png);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << c.png;
  }
  if (pictures) {
    EXPECT_TRUE(files.warnings.empty()) << files.warnings.front();
  }

  const fs::path figures = tmp.path() / "out" / "figures";
  const std::string gp = slurp(figures / "test_report_demo_speedup.gp");
  const std::string dat = slurp(figures / "test_report_demo_speedup.dat");
  EXPECT_NE(gp.find("ideal (S = p)"), std::string::npos);
  EXPECT_NE(dat.find("# series: ideal (S = p)"), std::string::npos);
  EXPECT_NEAR(legend_f(gp, "v2_padded"), kSerialV2, 0.002) << gp;
  EXPECT_NEAR(legend_f(dat, "v1_naive"), kSerialV1, 0.002) << dat;
  // Relative names only, so the figures folder can be moved.
  EXPECT_NE(gp.find("'test_report_demo_speedup.dat'"), std::string::npos);
  EXPECT_EQ(gp.find(figures.string()), std::string::npos);
  EXPECT_NE(gp.find("gnuplot test_report_demo_speedup.gp"), std::string::npos);
  EXPECT_NE(slurp(figures / "test_report_demo_bandwidth_vs_n.gp").find("logscale x"),
            std::string::npos);

  ASSERT_TRUE(fs::is_regular_file(files.md));
  ASSERT_TRUE(fs::is_regular_file(files.html));
  const std::string md = slurp(files.md);
  EXPECT_NE(md.find("Files that could not be loaded"), std::string::npos);
  EXPECT_NE(md.find(load_errors.front()), std::string::npos);
  EXPECT_NE(md.find("Report demo"), std::string::npos);
  EXPECT_NE(md.find("Demo CPU @ 3 GHz"), std::string::npos);
  EXPECT_NE(md.find("0123456 (dirty)"), std::string::npos);
  EXPECT_NE(md.find("## Calibration"), std::string::npos);
  EXPECT_NE(md.find("Karp–Flatt"), std::string::npos);
  if (pictures) {
    EXPECT_NE(md.find("](figures/test_report_demo_speedup.svg)"), std::string::npos);
  }

  const std::string html = slurp(files.html);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find(load_errors.front()), std::string::npos);
  if (pictures) {
    EXPECT_NE(html.find("<svg"), std::string::npos);
    EXPECT_EQ(html.find("<?xml"), std::string::npos);
  }
  // Self-contained: nothing fetched from elsewhere.
  const std::regex external(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, external));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

TEST(ReportFiles, TwoMachinesMergeIntoOneReport) {
  register_demo();
  TempDir tmp;
  const ReportFiles files = write_report({demo_run("alpha"), demo_run("beta")}, {}, tmp.path());
  const std::string dat = slurp(tmp.path() / "figures" / "test_report_demo_speedup.dat");
  EXPECT_NE(dat.find("# series: alpha: v1_naive"), std::string::npos);
  EXPECT_NE(dat.find("# series: beta: v2_padded"), std::string::npos);
  const std::string md = slurp(files.md);
  EXPECT_NE(md.find("| alpha |"), std::string::npos);
  EXPECT_NE(md.find("| beta |"), std::string::npos);
  EXPECT_EQ(md.find("Files that could not be loaded"), std::string::npos);
}

TEST(ReportFiles, WithoutGnuplotDataAndScriptsRemainAndTheReportSaysWhy) {
  register_demo();
  TempDir tmp;
  ScopedEnv no_gnuplot("CONCURDL_GNUPLOT", "");
  const ReportFiles files = write_report({demo_run("alpha")}, {}, tmp.path());
  ASSERT_EQ(files.warnings.size(), 1u);  // said once, not once per chart
  EXPECT_NE(files.warnings.front().find("gnuplot not found"), std::string::npos);
  for (const auto& c : files.charts) {
    EXPECT_TRUE(fs::is_regular_file(c.dat));
    EXPECT_TRUE(fs::is_regular_file(c.gp));
    EXPECT_TRUE(c.svg.empty());
    EXPECT_TRUE(c.png.empty());
  }
  const std::string md = slurp(files.md);
  EXPECT_NE(md.find("gnuplot not found"), std::string::npos);
  EXPECT_NE(md.find("(figures/test_report_demo_speedup.gp)"), std::string::npos);
  EXPECT_NE(slurp(files.html).find("gnuplot not found"), std::string::npos);
}

TEST(ReportFiles, AFailingGnuplotIsReportedWithItsExitStatus) {
  register_demo();
  TempDir tmp;
  ScopedEnv failing("CONCURDL_GNUPLOT", "/bin/false");
  const ReportFiles files = write_report({demo_run("alpha")}, {}, tmp.path());
  ASSERT_FALSE(files.warnings.empty());
  EXPECT_NE(files.warnings.front().find("gnuplot failed"), std::string::npos)
      << files.warnings.front();
  EXPECT_NE(files.warnings.front().find("exit 1"), std::string::npos);
  for (const auto& c : files.charts) {
    EXPECT_TRUE(fs::is_regular_file(c.gp));
    EXPECT_TRUE(c.svg.empty());
  }
  EXPECT_NE(slurp(files.md).find("gnuplot failed"), std::string::npos);
}

TEST(ReportFiles, QuotesAndUnderscoresInLabelsDoNotBreakTheScript) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed";
  TempDir tmp;
  ChartSpec c;
  c.stem = "odd_labels";
  c.title = "a \"quoted\" title with under_scores, a back\\slash, ^carets^ and <b> & co";
  c.x_label = "x_axis 'single'";
  c.y_label = "y {braces} @at";
  c.series.push_back({"series \"one\"_a", {{1, 1, 0.9, 1.1, ""}, {2, 3, 2.8, 3.1, ""}}, false});
  c.series.push_back({"model 'two'", {{1, 1, 1, 1, ""}, {2, 2, 2, 2, ""}}, true});
  std::string warning;
  const ChartFiles f = render_chart(c, tmp.path(), warning);
  EXPECT_EQ(warning, "");
  EXPECT_FALSE(f.svg.empty());
  EXPECT_FALSE(f.png.empty());
  const std::string svg = slurp(f.svg);
  EXPECT_NE(svg.find("under_scores"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);  // escaped, so it can be inlined in HTML
}

}  // namespace
