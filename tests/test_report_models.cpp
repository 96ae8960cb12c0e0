// Charts and reports beyond the main metric: an experiment's named metrics (columns of its table,
// or a figure's y), its analytical models (Figure::models: dashed, "model: ...", never a row),
// a scaling axis other than threads, and sizes typed with any suffix the axes accept.
// Set CONCURDL_KEEP_TEST_OUTPUT=1 to keep the temporary report directories for a look.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"
#include "report_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using namespace concurdl;
using namespace report_test;

// ---- named metrics ----

constexpr const char* kMetricsId = "testreport/metrics";

void register_metrics() {
  static const bool registered = register_experiment({
      .id = kMetricsId,
      .chapter = "99-test",
      .title = "Report metrics",
      .axes = {{.name = "variant", .values = {"ticket", "mcs"}},
               {.name = "threads", .values = {"1", "2", "4"}, .kind = AxisKind::count}},
      .metrics = {{"jain_index", "", false, "fairness over the threads, 1 = every thread alike"},
                  {"p99_latency", "s", true, "the 99th-percentile wait for the lock"}},
      .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
      .figures = {{.id = "fairness", .x = "threads", .y = "jain_index"},
                  {.id = "p99", .x = "threads", .y = "p99_latency"}},
  });
  (void)registered;
}

double jain(const std::string& variant, int threads) {
  return 1 - (variant == "mcs" ? 0.01 : 0.1) * (threads - 1);
}

RunFile metrics_run(const std::string& timer) {
  RunFile run = run_on("alpha");
  for (const char* v : {"ticket", "mcs"})
    for (int p : {1, 2, 4}) {
      Record r = record(kMetricsId, {{"variant", v}, {"threads", std::to_string(p)}}, 0.01);
      r.metrics["jain_index"] = metric("", jain(v, p));
      r.metrics["p99_latency"] = metric("s", 1e-6 * p);
      r.timer = timer;
      run.records.push_back(std::move(r));
    }
  return run;
}

TEST(ReportMetrics, EveryNamedMetricReachesMarkdownAndHtml) {
  register_metrics();
  TempDir tmp;
  const RunFile run = metrics_run("max_over_ranks(host)");
  const ReportFiles files = write_report({run}, {}, tmp.path());
  const std::string md = slurp(files.md), html = slurp(files.html);
  for (const std::string* doc : {&md, &html}) {
    EXPECT_NE(doc->find("jain_index (median [95% CI])"), std::string::npos);
    EXPECT_NE(doc->find("p99_latency (median [95% CI])"), std::string::npos);
    EXPECT_NE(doc->find("timed by: max_over_ranks(host)"), std::string::npos);
    EXPECT_NE(doc->find("fairness over the threads, 1 = every thread alike"), std::string::npos);
    // Every record's values, median and interval.
    for (const auto& r : run.records) {
      const Summary& j = r.metrics.at("jain_index").stats;
      const std::string cell =
          fmt::format("{:.4g} [{:.4g}, {:.4g}]", j.median, j.ci95_lo, j.ci95_hi);
      EXPECT_NE(doc->find(cell), std::string::npos) << cell;
      const Summary& l = r.metrics.at("p99_latency").stats;
      if (l.ci95_lo < 1e-6) continue;  // printed in ns, not µs
      const std::string latency = fmt::format("{:.2f} µs [{:.2f} µs, {:.2f} µs]", l.median * 1e6,
                                              l.ci95_lo * 1e6, l.ci95_hi * 1e6);
      EXPECT_NE(doc->find(latency), std::string::npos) << latency;
    }
  }
  // In the experiment's table, on the record's row.
  const std::string row = line_with(md, "| `threads=2, variant=mcs` |");
  ASSERT_FALSE(row.empty()) << md;
  EXPECT_NE(row.find(fmt::format("| {:.4g} [", jain("mcs", 2))), std::string::npos) << row;
  EXPECT_NE(row.find("| 2.00 µs ["), std::string::npos) << row;
}

TEST(ReportMetrics, TheHostClockNeedsNoTimerLine) {
  register_metrics();
  TempDir tmp;
  const ReportFiles files = write_report({metrics_run("host")}, {}, tmp.path());
  EXPECT_EQ(slurp(files.md).find("timed by"), std::string::npos);
  EXPECT_EQ(slurp(files.html).find("timed by"), std::string::npos);
}

TEST(ReportMetrics, AFigureWhoseYIsAMetricChartsItsMedianAndInterval) {
  register_metrics();
  const RunFile run = metrics_run("host");
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "testreport_metrics_fairness");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->y_label, "jain_index");
  const ChartSeries* mcs = find_series(*c, "mcs");
  ASSERT_NE(mcs, nullptr);
  ASSERT_EQ(mcs->points.size(), 3u);
  const Summary& j = run.records[4].metrics.at("jain_index").stats;  // mcs, threads = 2
  ASSERT_EQ(run.records[4].params.at("threads"), "2");
  EXPECT_DOUBLE_EQ(mcs->points[1].x, 2);
  EXPECT_DOUBLE_EQ(mcs->points[1].y, j.median);
  EXPECT_DOUBLE_EQ(mcs->points[1].lo, j.ci95_lo);
  EXPECT_DOUBLE_EQ(mcs->points[1].hi, j.ci95_hi);
  EXPECT_LT(j.ci95_lo, j.median);

  const ChartSpec* p99 = find_chart(charts, "testreport_metrics_p99");
  ASSERT_NE(p99, nullptr);
  EXPECT_EQ(p99->y_label, "p99_latency (s)");

  TempDir tmp;
  std::string warning;
  const ChartFiles f = render_chart(*c, tmp.path(), warning);
  const std::string dat = slurp(f.dat);
  const std::string row =
      fmt::format("{} {} {} {}", num(2), num(j.median), num(j.ci95_lo), num(j.ci95_hi));
  EXPECT_NE(dat.find("\n" + row + "\n"), std::string::npos) << dat;
  EXPECT_NE(slurp(f.gp).find("yerrorlines"), std::string::npos);
}

// ---- models ----

constexpr const char* kModelsId = "testreport/models";

void register_models() {
  static const bool registered = [] {
    const std::vector<Model> models = {
        {"twice a", "a",
         [](const ModelPoint& p) -> std::optional<double> {
           return 2 * p.records.front()->stats.median;
         }},
        {"records here", "",
         [](const ModelPoint& p) -> std::optional<double> {
           return static_cast<double>(p.records.size());
         }},
        {"gappy", "",
         [](const ModelPoint& p) -> std::optional<double> {
           if (p.x == 2) return std::nullopt;
           return 10 * p.x;
         }},
        {"bandwidth", "a",
         [](const ModelPoint& p) -> std::optional<double> {
           return p.calibration->mem_bandwidth_bytes_per_s / 1e9;
         }},
        {"nowhere", "c", [](const ModelPoint&) -> std::optional<double> { return 1.0; }},
    };
    return register_experiment({
        .id = kModelsId,
        .chapter = "99-test",
        .title = "Report models",
        .axes = {{.name = "variant", .values = {"a", "b"}},
                 {.name = "n", .values = {"1", "2", "4", "8", "16"}, .kind = AxisKind::size}},
        .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
        .figures = {{.id = "lines", .x = "n", .models = models},
                    {.id = "bars",
                     .kind = FigureKind::bars,
                     .x = "variant",
                     .series = "n",
                     .models = {models[1]}}},
    });
  }();
  (void)registered;
}

// a is measured at n = 1, 2, 4 and b at n = 1, 8, 16: the models must tell them apart.
RunFile models_run(const std::string& host) {
  RunFile run = run_on(host);
  for (int n : {1, 2, 4})
    run.records.push_back(
        record(kModelsId, {{"variant", "a"}, {"n", std::to_string(n)}}, 1e-3 * n));
  for (int n : {1, 8, 16})
    run.records.push_back(
        record(kModelsId, {{"variant", "b"}, {"n", std::to_string(n)}}, 2e-3 * n));
  return run;
}

TEST(ReportModels, EachModelIsEvaluatedAtItsSeriesXValuesWithTheRecordsThere) {
  register_models();
  const auto charts = build_charts({models_run("alpha")});
  const ChartSpec* c = find_chart(charts, "testreport_models_lines");
  ASSERT_NE(c, nullptr);

  const ChartSeries* twice = find_series(*c, "model: twice a");
  ASSERT_NE(twice, nullptr);
  EXPECT_TRUE(twice->is_model);
  EXPECT_TRUE(twice->experiment_model);
  EXPECT_EQ(twice->owner, "a");
  EXPECT_EQ(xs_of(*twice), (std::vector<double>{1, 2, 4}));  // a's x values only
  for (const auto& p : twice->points) EXPECT_DOUBLE_EQ(p.y, 2 * 1e-3 * p.x);

  // No series named: every x of the figure, with every record measured there.
  const ChartSeries* here = find_series(*c, "model: records here");
  ASSERT_NE(here, nullptr);
  EXPECT_EQ(xs_of(*here), (std::vector<double>{1, 2, 4, 8, 16}));
  EXPECT_DOUBLE_EQ(here->points[0].y, 2);  // a and b at n = 1
  EXPECT_DOUBLE_EQ(here->points[1].y, 1);

  // nullopt leaves a gap: no point at x = 2, and no line across it.
  const ChartSeries* gappy = find_series(*c, "model: gappy");
  ASSERT_NE(gappy, nullptr);
  EXPECT_EQ(xs_of(*gappy), (std::vector<double>{1, 4, 8, 16}));
  EXPECT_FALSE(gappy->points[0].gap_before);
  EXPECT_TRUE(gappy->points[1].gap_before);
  EXPECT_FALSE(gappy->points[2].gap_before);
  EXPECT_NE(notes_of(*c).find("model: gappy: no value at x = 2"), std::string::npos);

  const ChartSeries* bw = find_series(*c, "model: bandwidth");  // from the run's calibration
  ASSERT_NE(bw, nullptr);
  for (const auto& p : bw->points) EXPECT_DOUBLE_EQ(p.y, 20);

  EXPECT_EQ(find_series(*c, "model: nowhere"), nullptr);
  EXPECT_NE(notes_of(*c).find("no measured series 'c'"), std::string::npos);

  // Measured series first; they are the only ones that are not models.
  bool seen_model = false;
  for (const auto& s : c->series) {
    seen_model = seen_model || s.is_model;
    EXPECT_TRUE(s.is_model || !seen_model) << s.label << " after a model";
    EXPECT_EQ(s.is_model, s.label.rfind("model: ", 0) == 0) << s.label;
  }

  // Bars: models are not drawn, and the chart says so.
  const ChartSpec* bars = find_chart(charts, "testreport_models_bars");
  ASSERT_NE(bars, nullptr);
  for (const auto& s : bars->series) EXPECT_FALSE(s.is_model) << s.label;
  EXPECT_NE(notes_of(*bars).find("not drawn here: records here"), std::string::npos);
}

TEST(ReportModels, MergedRunsGetOneCurvePerRun) {
  register_models();
  const auto charts = build_charts({models_run("alpha"), models_run("beta")});
  const ChartSpec* c = find_chart(charts, "testreport_models_lines");
  ASSERT_NE(c, nullptr);
  const ChartSeries* alpha = find_series(*c, "model: twice a (alpha)");
  const ChartSeries* beta = find_series(*c, "model: twice a (beta)");
  ASSERT_NE(alpha, nullptr);
  ASSERT_NE(beta, nullptr);
  EXPECT_EQ(alpha->owner, "alpha: a");
  EXPECT_EQ(beta->owner, "beta: a");
  EXPECT_EQ(xs_of(*beta), (std::vector<double>{1, 2, 4}));
  const ChartSeries* here = find_series(*c, "model: records here (beta)");
  ASSERT_NE(here, nullptr);
  EXPECT_DOUBLE_EQ(here->points[0].y, 2);  // a and b of its own run, not four records
}

// A projection: evaluated at its own x values (past the measurements), fitted to every record
// of the run's experiment (not only those the figure's `where` keeps), with a note of its fit.
TEST(ReportModels, AProjectionRunsPastTheMeasurementsAndSeesEveryRecordOfTheRun) {
  static const bool registered = register_experiment({
      .id = "testreport/projection",
      .chapter = "99-test",
      .title = "Report projection",
      .axes = {{.name = "variant", .values = {"a"}},
               {.name = "ranks", .values = {"2", "4"}, .kind = AxisKind::count},
               {.name = "n", .values = {"1", "2"}, .kind = AxisKind::size}},
      .scaling_axis = "ranks",
      .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
      .figures = {{.id = "out",
                   .x = "ranks",
                   .where = {{"n", "2"}},
                   .log_x = true,
                   .models = {{.label = "records of the run",
                               .series = "a",
                               .y = [](const ModelPoint& p) -> std::optional<double> {
                                 return static_cast<double>(p.run_records.size()) * 100 +
                                        static_cast<double>(p.records.size());
                               },
                               .xs = {2, 64, 1024},
                               .note =
                                   [](const ModelPoint& p) {
                                     return fmt::format("fitted to {} records",
                                                        p.run_records.size());
                                   }}}}},
  });
  (void)registered;
  RunFile run = run_on("alpha");
  for (int ranks : {2, 4})
    for (int n : {1, 2})
      run.records.push_back(
          record("testreport/projection",
                 {{"variant", "a"}, {"ranks", std::to_string(ranks)}, {"n", std::to_string(n)}},
                 1e-3 * n));
  run.records.back().valid = false;  // invalid records are not fitted to
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "testreport_projection_out");
  ASSERT_NE(c, nullptr);
  const ChartSeries* m = find_series(*c, "model: records of the run");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(xs_of(*m), (std::vector<double>{2, 64, 1024}));  // not 4, where it was measured
  EXPECT_DOUBLE_EQ(m->points[0].y, 301);  // 3 valid records of the run; 1 measured at x = 2
  EXPECT_DOUBLE_EQ(m->points[1].y, 300);  // nothing measured at 64
  EXPECT_NE(notes_of(*c).find("model: records of the run: fitted to 3 records"), std::string::npos)
      << notes_of(*c);
}

TEST(ReportModels, DashedLabelledInTheirOwnBlocksAndNeverARowOfTheTables) {
  register_models();
  TempDir tmp;
  const ReportFiles files = write_report({models_run("alpha")}, {}, tmp.path());
  const fs::path figures = tmp.path() / "figures";
  const std::string gp = slurp(figures / "testreport_models_lines.gp");
  const std::string dat = slurp(figures / "testreport_models_lines.dat");

  // Dashed, in its series' colour (a is the first measured series, line type 1).
  const std::string twice = line_with(gp, "title \"model: twice a\"");
  ASSERT_FALSE(twice.empty()) << gp;
  EXPECT_NE(twice.find("with linespoints lt 1 dt 2 "), std::string::npos) << twice;
  const std::string gappy = line_with(gp, "title \"model: gappy\"");
  EXPECT_NE(gappy.find(" dt 2 "), std::string::npos) << gappy;

  // Its own block, named as a model, holding the model function's values only.
  const auto block = dat.find("# series: model: twice a\n");
  ASSERT_NE(block, std::string::npos) << dat;
  const std::string expected =
      "# kind: model (the experiment's, not a measurement)\n"
      "# columns: x model_y\n" +
      num(1) + " " + num(2e-3) + "\n" + num(2) + " " + num(4e-3) + "\n" + num(4) + " " + num(8e-3) +
      "\n";
  EXPECT_EQ(dat.substr(block + 25, expected.size()), expected) << dat.substr(block);
  // A single blank line where the model has no value: gnuplot lifts the pen there.
  EXPECT_NE(dat.find("x model_y\n1 10\n\n4 40\n8 80\n16 160\n"), std::string::npos) << dat;

  // The pictures render (gaps and dashes are valid gnuplot), unless gnuplot is missing.
  for (const auto& w : files.warnings)
    EXPECT_NE(w.find("gnuplot not found"), std::string::npos) << w;

  const std::string md = slurp(files.md), html = slurp(files.html);
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("|", 0) == 0) {
      EXPECT_EQ(line.find("model"), std::string::npos) << line;
    }
  EXPECT_EQ(html.find("<td>model"), std::string::npos);
  EXPECT_EQ(html.find("<code>model"), std::string::npos);
  for (const std::string* doc : {&md, &html}) {
    const std::string listed = line_with(*doc, "Models drawn: ");
    EXPECT_NE(listed.find("model: twice a; model: records here; model: gappy"), std::string::npos)
        << listed;
  }
}

// ---- the scaling axis ----

constexpr const char* kRanksId = "testreport/ranks";
constexpr double kSerial = 0.1;

void register_ranks() {
  static const bool registered = register_experiment({
      .id = kRanksId,
      .chapter = "99-test",
      .title = "Report ranks",
      .axes = {{.name = "variant", .values = {"ring"}},
               {.name = "ranks", .values = {"1", "2", "4", "8"}, .kind = AxisKind::count},
               {.name = "n", .values = {"1024", "4096"}, .kind = AxisKind::size}},
      .baseline = {{"ranks", "1"}},
      .scaling_axis = "ranks",
      .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
      .figures =
          {{.id = "speedup", .kind = FigureKind::speedup, .x = "ranks", .where = {{"n", "1024"}}},
           // Against the size: a lines chart of the speedup (a speedup-kind figure along an axis
           // other than the scaling axis is refused at registration).
           {.id = "speedup_vs_n",
            .kind = FigureKind::lines,
            .x = "n",
            .y = "speedup",
            .where = {{"ranks", "8"}}}},
  });
  (void)registered;
}

TEST(ReportScalingAxis, SpeedupAgainstRanksGetsTheIdealLineAndAmdahlFit) {
  register_ranks();
  RunFile run = run_on("alpha");  // 4 cores: 8 ranks are oversubscribed
  for (const char* n : {"1024", "4096"})
    for (int p : {1, 2, 4, 8}) {
      const double s = p <= 4 ? amdahl_speedup(kSerial, p) : 0.9 * amdahl_speedup(kSerial, 4);
      Record r =
          record(kRanksId, {{"variant", "ring"}, {"ranks", std::to_string(p)}, {"n", n}}, 0.1 / s);
      r.derived["speedup"] = s;
      run.records.push_back(std::move(r));
    }
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "testreport_ranks_speedup");
  ASSERT_NE(c, nullptr);
  const ChartSeries* ideal = find_series(*c, "ideal (S = p)");
  ASSERT_NE(ideal, nullptr);
  EXPECT_DOUBLE_EQ(ideal->points.back().y, 8);
  const ChartSeries* fit = nullptr;
  for (const auto& s : c->series)
    if (s.label.rfind("Amdahl fit (ring): f = ", 0) == 0) fit = &s;
  ASSERT_NE(fit, nullptr);
  EXPECT_NEAR(std::stod(fit->label.substr(23)), kSerial, 0.002) << fit->label;
  const std::string notes = notes_of(*c);
  EXPECT_NE(notes.find("p <= 4"), std::string::npos) << notes;
  EXPECT_NE(notes.find("oversubscribed"), std::string::npos) << notes;
  EXPECT_NE(notes.find("Karp–Flatt"), std::string::npos) << notes;

  // Against the size, speedup has no S = p and no Amdahl fit: n counts no workers.
  const ChartSpec* by_n = find_chart(charts, "testreport_ranks_speedup_vs_n");
  ASSERT_NE(by_n, nullptr);
  for (const auto& s : by_n->series) EXPECT_FALSE(s.is_model) << s.label;
  EXPECT_EQ(notes_of(*by_n).find("Karp–Flatt"), std::string::npos);
}

// ---- sizes with any suffix the axes accept ----

constexpr const char* kSizesId = "testreport/sizes";

TEST(ReportCharts, SizesWithLowerCaseSuffixesAreNumbersNotCategories) {
  static const bool registered = register_experiment({
      .id = kSizesId,
      .chapter = "99-test",
      .title = "Report sizes",
      .axes = {{.name = "variant", .values = {"copy"}},
               {.name = "n", .values = {"1k", "64K", "16m"}, .kind = AxisKind::size}},
      .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
      .figures = {{.id = "time", .x = "n", .log_x = true}},
  });
  (void)registered;
  RunFile run = run_on("alpha");
  for (const char* n : {"16m", "1k", "64K"})
    run.records.push_back(record(kSizesId, {{"variant", "copy"}, {"n", n}}, 1e-3));
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "testreport_sizes_time");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->log_x);
  EXPECT_EQ(notes_of(*c).find("not numeric"), std::string::npos) << notes_of(*c);
  const ChartSeries* s = find_series(*c, "copy");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(xs_of(*s), (std::vector<double>{1024, 65536, 16777216}));
  for (const auto& p : s->points) EXPECT_TRUE(p.x_label.empty());
}

}  // namespace
