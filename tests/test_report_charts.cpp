// Chart kinds beyond the speedup, efficiency, bar and line charts of test_report.cpp: a stacked
// figure (FigureKind::stacked), each series a slice of one bar per x.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"
#include "report_test_util.hpp"

namespace {

using namespace concurdl;
using namespace report_test;

// A stacked figure: each series a slice of one bar per x, from the running top below it to the
// new top, in the axis order; drawn as boxes from slice to slice, without intervals.
constexpr const char* kStackId = "test/report_stacked";
TEST(ReportCharts, AStackedFigureStacksTheSeriesInTheirOrder) {
  static const bool registered = register_experiment({
      .id = kStackId,
      .chapter = "99-test",
      .title = "Report stacked",
      .axes = {{.name = "phase", .values = {"load", "compute", "store"}},
               {.name = "threads", .values = {"1", "2"}, .kind = AxisKind::count}},
      .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
      .figures = {{.id = "phases",
                   .title = "Time by phase",
                   .kind = FigureKind::stacked,
                   .x = "threads",
                   .series = "phase"}},
  });
  (void)registered;
  RunFile run;
  run.provenance = {{"host", "stack"}};
  const std::map<std::string, double> seconds = {{"load", 1}, {"compute", 4}, {"store", 2}};
  for (const char* threads : {"1", "2"})
    for (const char* phase : {"load", "compute", "store"}) {
      Record r;
      r.experiment = kStackId;
      r.chapter = "99-test";
      r.params = {{"phase", phase}, {"threads", threads}};
      const double s = seconds.at(phase) / (threads[0] == '2' ? 2.0 : 1.0);
      r.samples = {0.9 * s, s, 1.1 * s};
      r.stats = summarize(r.samples);
      run.records.push_back(r);
    }
  const auto charts = build_charts({run});
  const ChartSpec* c = find_chart(charts, "test_report_stacked_phases");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->series.size(), 3u);
  EXPECT_EQ(c->series[0].label, "load");  // the bottom slice first, as the axis orders them
  EXPECT_EQ(c->series[2].label, "store");
  const ChartPoint& compute_at_1 = c->series[1].points.at(0);
  EXPECT_DOUBLE_EQ(compute_at_1.lo, 1.0);  // on top of load
  EXPECT_DOUBLE_EQ(compute_at_1.y, 5.0);
  const ChartPoint& store_at_2 = c->series[2].points.at(1);
  EXPECT_DOUBLE_EQ(store_at_2.lo, 2.5);
  EXPECT_DOUBLE_EQ(store_at_2.y, 3.5);  // the bar's top: the sum of its slices
  TempDir tmp;
  std::string warning;
  const ChartFiles f = render_chart(*c, tmp.path(), warning);
  if (gnuplot_available()) {
    EXPECT_EQ(warning, "");
  }
  const std::string gp = slurp(f.gp);
  EXPECT_NE(gp.find("boxxyerror"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("yerrorbars"), std::string::npos) << "no intervals on a stacked bar";
}

}  // namespace
