// The report tests' demo experiment (test/report_demo, registered once for the whole test
// binary) and its Amdahl-shaped records, shared by the chart tests (test_report.cpp) and the
// report-file tests (test_report_files.cpp); a scoped environment variable.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <tuple>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/stats.hpp"

namespace report_test {

using namespace concurdl;

inline constexpr const char* kId = "test/report_demo";
inline constexpr double kSerialV1 = 0.2;   // v1_naive's serial fraction
inline constexpr double kSerialV2 = 0.05;  // v2_padded's
inline constexpr int kCores = 4;           // the demo machine's: points at p = 8 are oversubscribed
inline constexpr long kBigN = 1048576;

inline void register_demo() {
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

inline Record make_record(const std::string& variant, int threads, long n, double seconds) {
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
inline RunFile demo_run(const std::string& host, const std::string& dir = "") {
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
  run.path = std::filesystem::path("/results/runs") / (dir.empty() ? "2025-run-" + host : dir) /
             "results.json";
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
inline double legend_f(const std::string& text, const std::string& name) {
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

}  // namespace report_test
