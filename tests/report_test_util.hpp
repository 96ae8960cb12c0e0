// What the report tests share (test_report*.cpp): a temporary directory per test, a file's
// text, and a chart or series found by name. Set CONCURDL_KEEP_TEST_OUTPUT=1 to keep the
// directories for a look (their paths are printed).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/report.hpp"

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

}  // namespace report_test
