// The report's way in: it opens with what the run shows (the lessons' claims), then the
// chapters at a glance with links to their lessons, a contents list, and the detail below;
// every link within it resolves, in report.html and in report.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"

namespace {

namespace fs = std::filesystem;
using namespace concurdl;

constexpr const char* kId = "test/nav_demo";

// In chapter 01's folder, so that the report links that lesson's README from the source tree.
void register_nav_demo() {
  static const bool registered = register_experiment({
      .id = kId,
      .chapter = "01-threads",
      .title = "Navigation demo",
      .axes = {{.name = "variant", .values = {"adjacent", "padded"}},
               {.name = "threads", .values = {"1", "2"}, .kind = AxisKind::count}},
      .baseline = {{"threads", "1"}},
      .prepare =
          [](const Params&, GroupCache&) {
            return Trial{.run = [] {}, .check = [] { return std::string(); }};
          },
      .figures = {{.id = "bars",
                   .title = "Nav demo time",
                   .kind = FigureKind::bars,
                   .x = "variant",
                   .series = "threads"}},
      .claims = {{.id = "padded_faster",
                  .statement = "Padded beats adjacent at 2 threads",
                  .select = {{"variant", "padded"}, {"threads", "2"}},
                  .versus = {{"variant", "adjacent"}},
                  .bound = 1.2,
                  .unit = "×"},
                 {.id = "padded_much_faster",
                  .statement = "Padded is ten times adjacent at 2 threads",
                  .select = {{"variant", "padded"}, {"threads", "2"}},
                  .versus = {{"variant", "adjacent"}},
                  .bound = 10,
                  .unit = "×"},
                 {.id = "gpu_only",
                  .statement = "Only on a GPU",
                  .select = {{"variant", "padded"}},
                  .needs_gpu = true}},
  });
  (void)registered;
}

Record nav_record(const std::string& variant, int threads, double seconds) {
  Record r;
  r.experiment = kId;
  r.chapter = "01-threads";
  r.params = {{"variant", variant}, {"threads", std::to_string(threads)}};
  for (double k : {0.99, 1.0, 1.01}) r.samples.push_back(seconds * k);
  r.stats = summarize(r.samples);
  return r;
}

RunFile nav_run() {
  RunFile run;
  run.concurdl_version = "0.1.0";
  run.command = {"concurdl", "run", "ch01"};
  run.provenance = {
      {"host", "navhost"}, {"cores", 2}, {"profile", "quick"}, {"gpus", nlohmann::json::array()}};
  run.records = {nav_record("adjacent", 1, 0.02), nav_record("padded", 1, 0.02),
                 nav_record("adjacent", 2, 0.015), nav_record("padded", 2, 0.01)};
  run.records.back().notes["noisy"] = "other processes used 0.97 CPUs during the timed repetitions";
  return run;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Dir {
  fs::path path = fs::temp_directory_path() / ("concurdl_test_nav_" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
};

std::set<std::string> all(const std::string& text, const std::regex& re) {
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
    out.insert((*it)[1].str());
  return out;
}

TEST(ReportNavigation, OpensWithWhatTheRunShows) {
  register_nav_demo();
  Dir dir;
  const ReportFiles files = write_report({nav_run()}, {}, dir.path);
  const std::string md = slurp(files.md);
  const auto claims = md.find("## What this run shows");
  ASSERT_NE(claims, std::string::npos);
  EXPECT_LT(claims, md.find("## Chapters at a glance"));
  EXPECT_LT(md.find("## Chapters at a glance"), md.find("## Contents"));
  EXPECT_LT(md.find("## Contents"), md.find("## Runs"));
  // One line per claim, each with its value or reason. Both laws' records are noted noisy, so
  // neither is judged, the one that would have held and the one that would have failed alike.
  EXPECT_NE(md.find("- **not judged** test/nav_demo: Padded beats adjacent at 2 threads — 1.5× (at "
                    "least 1.2×; reference not measured yet); not judged: its records are noted "
                    "noisy (the machine was busy); it would have held [noisy: measured while the "
                    "machine was busy]"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- **not judged** test/nav_demo: Padded is ten times adjacent"),
            std::string::npos);
  EXPECT_NE(md.find("it would have failed"), std::string::npos);
  EXPECT_NE(md.find("- **n/a** test/nav_demo: Only on a GPU — needs a GPU; this run had none"),
            std::string::npos);
  EXPECT_NE(md.find("0 held, 0 not held, 1 not applicable; 2 not judged (disturbed records)."),
            std::string::npos);
  // The chapter's row: its lesson, its claims and its flagged records.
  EXPECT_NE(md.find("| 0 of 0 held (1 not applicable, 2 not judged (disturbed records)) | 4 "
                    "records, 1 noisy |"),
            std::string::npos)
      << md;
  EXPECT_NE(
      md.find("[README](" +
              fs::relative(fs::path(CONCURDL_SOURCE_DIR) / "chapters" / "01-threads" / "README.md",
                           dir.path)
                  .generic_string() +
              ")"),
      std::string::npos)
      << md;
  // A run with records measured while the machine was busy says so before the claims.
  const auto busy = md.find("This run was measured on a busy machine: 1 of its 4 records");
  EXPECT_NE(busy, std::string::npos) << md;
  EXPECT_LT(busy, claims);
  const std::string html = slurp(files.html);
  EXPECT_LT(html.find("id=\"claims\""), html.find("id=\"runs\""));
  EXPECT_EQ(html.find("<li class=\"failed\">"), std::string::npos) << "not judged is not failed";
  EXPECT_NE(html.find("<strong>not judged</strong>"), std::string::npos);
}

// A calibration whose threads were short of cores (the FMA peak at 2 threads about one
// thread's: a host placing both vCPUs on one core) is said before the claims; a sound one is not.
TEST(ReportNavigation, SaysWhenTheCalibrationsThreadsWereShortOfCores) {
  register_nav_demo();
  auto fma = [](const char* threads, double flops) {
    Record r;
    r.experiment = "calibrate/fma_peak";
    r.params = {{"threads", threads}};
    r.derived["flops_per_s"] = flops;
    return r;
  };
  RunFile run = nav_run();
  run.calibration = calibration_from_records({fma("1", 255e9), fma("2", 256e9)});
  ASSERT_TRUE(run.calibration.detail.contains("cores_short")) << run.calibration.detail.dump();
  Dir dir;
  std::string md = slurp(write_report({run}, {}, dir.path).md);
  const auto warning = md.find(
      "This run's calibration found its threads short of cores: "
      "calibrate/fma_peak threads=2: 1.00x one thread's FLOP/s");
  EXPECT_NE(warning, std::string::npos) << md;
  EXPECT_LT(warning, md.find("## What this run shows"));
  run.calibration = calibration_from_records({fma("1", 255e9), fma("2", 500e9)});
  EXPECT_FALSE(run.calibration.detail.contains("cores_short"));
  Dir dir2;
  md = slurp(write_report({run}, {}, dir2.path).md);
  EXPECT_EQ(md.find("short of cores"), std::string::npos);
}

TEST(ReportNavigation, EveryLinkResolves) {
  register_nav_demo();
  Dir dir;
  const ReportFiles files = write_report({nav_run()}, {}, dir.path);
  const std::string html = slurp(files.html);
  const auto html_ids = all(html, std::regex(R"re(id="([^"]+)")re"));
  const auto html_refs = all(html, std::regex(R"re(href="([^"]+)")re"));
  ASSERT_GT(html_refs.size(), 5u);
  for (const std::string& ref : html_refs) {
    if (ref.rfind("#", 0) == 0)
      EXPECT_TRUE(html_ids.count(ref.substr(1))) << "html: no id for " << ref;
    else
      EXPECT_TRUE(fs::exists(dir.path / ref)) << "html: " << ref << " does not exist";
  }
  EXPECT_TRUE(html_refs.count("#exp-test-nav-demo"));
  EXPECT_TRUE(html_refs.count("#ch-01-threads"));

  const std::string md = slurp(files.md);
  const auto md_ids = all(md, std::regex(R"re(<a id="([^"]+)"></a>)re"));
  const auto md_refs = all(md, std::regex(R"re(\]\(([^)\s]+)\))re"));
  ASSERT_GT(md_refs.size(), 5u);
  for (const std::string& ref : md_refs) {
    if (ref.rfind("#", 0) == 0)
      EXPECT_TRUE(md_ids.count(ref.substr(1))) << "md: no anchor for " << ref;
    else
      EXPECT_TRUE(fs::exists(dir.path / ref)) << "md: " << ref << " does not exist";
  }
}

}  // namespace
