// A record above its calibrated ceiling (Record::notes "above_ceiling"): circled in its line and
// bar charts, named in the chart's notes, never in a chart of another metric.
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

constexpr const char* kCeilingId = "testreport/ceiling";

void register_ceiling() {
  static const bool registered = register_experiment({
      .id = kCeilingId,
      .chapter = "99-test",
      .title = "Report ceiling",
      .axes = {{.name = "variant", .values = {"naive", "blocked"}},
               {.name = "threads", .values = {"1", "2", "4"}, .kind = AxisKind::count}},
      .ceiling = Ceiling::peak_flops,
      .prepare = [](const Params&, GroupCache&) { return Trial{.run = [] {}}; },
      .figures = {{.id = "gflops",
                   .x = "threads",
                   .y = "flops_per_s",
                   .overlays = {Overlay::flops_ceiling}},
                  {.id = "bars",
                   .kind = FigureKind::bars,
                   .x = "variant",
                   .y = "fraction_of_ceiling",
                   .series = "threads"},
                  {.id = "time", .x = "threads"}},
  });
  (void)registered;
}

// Peak 1e11 FLOP/s (run_on); blocked on 4 threads claims 1.27 x that when `above`.
RunFile ceiling_run(bool above) {
  RunFile run = run_on("alpha");
  for (const char* v : {"naive", "blocked"})
    for (int p : {1, 2, 4}) {
      Record r = record(kCeilingId, {{"variant", v}, {"threads", std::to_string(p)}}, 1e-3 / p);
      const bool flagged = above && std::string(v) == "blocked" && p == 4;
      const double flops = flagged ? 1.27e11 : (std::string(v) == "naive" ? 1e9 : 2e10) * p;
      r.derived["flops_per_s"] = flops;
      r.derived["fraction_of_ceiling"] = flops / run.calibration.peak_flops;
      if (flagged)
        r.notes["above_ceiling"] =
            "1.27 x the calibrated peak FLOP/s: the calibration may have been disturbed (another "
            "program running while it measured), or the declared work is wrong";
      run.records.push_back(std::move(r));
    }
  return run;
}

std::size_t flagged_points(const ChartSpec& c) {
  std::size_t n = 0;
  for (const auto& s : c.series)
    for (const auto& p : s.points) n += p.above_ceiling ? 1 : 0;
  return n;
}

TEST(ReportCeiling, ARecordAboveItsCeilingIsCircledInItsChartsAndNamedInTheNotes) {
  register_ceiling();
  const auto charts = build_charts({ceiling_run(true)});
  const ChartSpec* c = find_chart(charts, "testreport_ceiling_gflops");
  ASSERT_NE(c, nullptr);
  const ChartSeries* blocked = find_series(*c, "blocked");
  ASSERT_NE(blocked, nullptr);
  ASSERT_EQ(blocked->points.size(), 3u);
  EXPECT_FALSE(blocked->points[0].above_ceiling);
  EXPECT_TRUE(blocked->points[2].above_ceiling);  // threads = 4
  EXPECT_EQ(flagged_points(*c), 1u);
  const std::string notes = notes_of(*c);
  const std::string note = line_with(notes, "above the calibrated ceiling");
  EXPECT_NE(note.find("1 point lies above the calibrated ceiling (circled in red): blocked at "
                      "threads = 4 (1.27 x the calibrated peak FLOP/s)."),
            std::string::npos)
      << notes;
  EXPECT_NE(note.find("the calibration may have been disturbed"), std::string::npos) << note;
  EXPECT_NE(note.find("the declared work is wrong"), std::string::npos) << note;

  // The time itself is not what the ceiling bounds: that chart circles nothing.
  const ChartSpec* time = find_chart(charts, "testreport_ceiling_time");
  ASSERT_NE(time, nullptr);
  EXPECT_EQ(flagged_points(*time), 0u);
  EXPECT_EQ(notes_of(*time).find("calibrated ceiling"), std::string::npos) << notes_of(*time);

  // The .dat repeats the point in a marker block after the series; the .gp circles it, once.
  TempDir tmp;
  std::string warning;
  const ChartFiles f = render_chart(*c, tmp.path(), warning);
  const std::string dat = slurp(f.dat), gp = slurp(f.gp);
  std::size_t drawn = 0;
  for (const auto& s : c->series) drawn += s.points.empty() ? 0 : 1;
  const std::string block = fmt::format(
      "# index {}\n# series: above the calibrated ceiling (see notes)\n"
      "# kind: marker (measured points above their calibrated ceiling; see the notes)\n"
      "# columns: x y\n{} {}\n",
      drawn, num(4), num(1.27e11));
  EXPECT_NE(dat.find(block), std::string::npos) << dat;
  const std::string clause = line_with(gp, "title \"above the calibrated ceiling (see notes)\"");
  ASSERT_FALSE(clause.empty()) << gp;
  EXPECT_NE(clause.find(fmt::format("index {} using 1:2 with points pt 6", drawn)),
            std::string::npos)
      << clause;
  EXPECT_NE(clause.find("lc rgb '#e00000'"), std::string::npos) << clause;
  EXPECT_EQ(gp.find("above the calibrated ceiling (see notes)"),
            gp.rfind("above the calibrated ceiling (see notes)"))
      << gp;
  for (const auto& n : c->notes) EXPECT_NE(gp.find("# note: " + n), std::string::npos) << n;
  // Valid gnuplot: the picture renders, unless gnuplot is missing.
  if (!warning.empty()) {
    EXPECT_NE(warning.find("gnuplot not found"), std::string::npos) << warning;
  }
}

TEST(ReportCeiling, ABarAboveItsCeilingIsCircledAtItsTop) {
  register_ceiling();
  const auto charts = build_charts({ceiling_run(true)});
  const ChartSpec* c = find_chart(charts, "testreport_ceiling_bars");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(flagged_points(*c), 1u);
  EXPECT_NE(notes_of(*c).find("threads=4 at variant = blocked (1.27 x"), std::string::npos)
      << notes_of(*c);
  TempDir tmp;
  std::string warning;
  const ChartFiles f = render_chart(*c, tmp.path(), warning);
  const std::string dat = slurp(f.dat);
  // Three bars per variant (threads 1, 2, 4), 0.8 / 3 wide: the fourth-thread bar of "blocked"
  // (category 1) stands 0.8 / 3 right of it, and its top is the fraction 1.27.
  const std::string columns = "# columns: x (moved onto its bar) y\n";
  const auto at = dat.find(columns);
  ASSERT_NE(at, std::string::npos) << dat;
  std::istringstream row(dat.substr(at + columns.size()));
  double x = 0, y = 0;
  row >> x >> y;
  EXPECT_NEAR(x, 1 + 0.8 / 3, 1e-9) << dat.substr(at);
  EXPECT_DOUBLE_EQ(y, 1.27);
  const std::string gp = slurp(f.gp);
  EXPECT_NE(line_with(gp, "with points pt 6").find("above the calibrated ceiling"),
            std::string::npos)
      << gp;
  if (!warning.empty()) {
    EXPECT_NE(warning.find("gnuplot not found"), std::string::npos) << warning;
  }
}

TEST(ReportCeiling, NoRecordAboveItsCeilingNoCircleNoNote) {
  register_ceiling();
  const auto charts = build_charts({ceiling_run(false)});
  for (const char* stem : {"testreport_ceiling_gflops", "testreport_ceiling_bars"}) {
    const ChartSpec* c = find_chart(charts, stem);
    ASSERT_NE(c, nullptr) << stem;
    EXPECT_EQ(flagged_points(*c), 0u) << stem;
    EXPECT_EQ(notes_of(*c).find("calibrated ceiling"), std::string::npos) << notes_of(*c);
    TempDir tmp;
    std::string warning;
    const ChartFiles f = render_chart(*c, tmp.path(), warning);
    EXPECT_EQ(slurp(f.dat).find("marker"), std::string::npos) << stem;
    EXPECT_EQ(slurp(f.gp).find("above the calibrated ceiling"), std::string::npos) << stem;
    EXPECT_EQ(slurp(f.gp).find("pt 6 ps 2.4"), std::string::npos) << stem;
  }
}

}  // namespace
