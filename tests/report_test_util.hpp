// What the report tests share (test_report*.cpp): a temporary directory per test, a file's
// text, a chart or series found by name, hand-made records and runs. Set
// CONCURDL_KEEP_TEST_OUTPUT=1 to keep the directories for a look (their paths are printed).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"

namespace report_test {

namespace fs = std::filesystem;

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "concurdl_test_report_") {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            (prefix + std::to_string(::getpid()) + "_" + std::to_string(++counter));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    if (std::getenv("CONCURDL_KEEP_TEST_OUTPUT")) {
      std::fprintf(stderr, "kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether the report can draw pictures here (CONCURDL_GNUPLOT set means a test points it
// elsewhere).
inline bool gnuplot_available() {
  if (std::getenv("CONCURDL_GNUPLOT")) return false;
  if (*concurdl::build::gnuplot && ::access(concurdl::build::gnuplot, X_OK) == 0) return true;
  return std::system("command -v gnuplot > /dev/null 2>&1") == 0;
}

inline const concurdl::ChartSpec* find_chart(const std::vector<concurdl::ChartSpec>& charts,
                                             const std::string& stem) {
  for (const auto& c : charts)
    if (c.stem == stem) return &c;
  return nullptr;
}

inline const concurdl::ChartSeries* find_series(const concurdl::ChartSpec& c,
                                                const std::string& label) {
  for (const auto& s : c.series)
    if (s.label == label) return &s;
  return nullptr;
}

inline std::string num(double v) { return fmt::format("{:.10g}", v); }

// The line of `text` that contains `key` ("" when none).
inline std::string line_with(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return "";
  const auto start = text.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
  return text.substr(start, text.find('\n', at) - start);
}

// Hand-made records and runs, and what the tests read off charts: a record whose median is
// `seconds` exactly, with every declared metric's samples.
inline concurdl::Record record(const std::string& experiment, concurdl::Params params,
                               double seconds) {
  concurdl::Record r;
  r.experiment = experiment;
  r.chapter = "99-test";
  r.params = std::move(params);
  for (double k : {0.99, 1.0, 1.01, 0.995, 1.005}) r.samples.push_back(seconds * k);
  r.stats = concurdl::summarize(r.samples);
  r.timer = "host";
  return r;
}

inline concurdl::MetricSeries metric(const std::string& unit, double median) {
  concurdl::MetricSeries m;
  m.unit = unit;
  for (double k : {0.98, 1.0, 1.02, 0.99, 1.01}) m.samples.push_back(median * k);
  m.stats = concurdl::summarize(m.samples);
  return m;
}

inline concurdl::RunFile run_on(const std::string& host) {
  concurdl::RunFile run;
  run.provenance = {{"host", host}, {"cores", 4}};
  run.calibration.mem_bandwidth_bytes_per_s = 2e10;
  run.calibration.peak_flops = 1e11;
  run.path = fs::path("/results/runs") / ("run-" + host) / "results.json";
  return run;
}

inline std::vector<double> xs_of(const concurdl::ChartSeries& s) {
  std::vector<double> xs;
  for (const auto& p : s.points) xs.push_back(p.x);
  return xs;
}

inline std::string notes_of(const concurdl::ChartSpec& c) {
  return fmt::format("{}", fmt::join(c.notes, "\n"));
}

}  // namespace report_test
