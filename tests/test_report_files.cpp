// The files a report leaves behind: data, gnuplot scripts, pictures and one self-contained
// HTML page, with gnuplot present, absent or failing (the demo experiment: report_demo.hpp).
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
  EXPECT_NE(dat.find("# series: Demo CPU @ 3 GHz, 4 CPUs (alpha): v1_naive"), std::string::npos);
  EXPECT_NE(dat.find("# series: Demo CPU @ 3 GHz, 4 CPUs (beta): v2_padded"), std::string::npos);
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
