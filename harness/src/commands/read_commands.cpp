// The commands that read runs already made: `concurdl report` (charts and the report of one run
// or several merged), `concurdl compare` (two runs, configuration by configuration) and
// `concurdl check` (the lessons' claims judged on each run).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli_detail.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/compare.hpp"
#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/noise.hpp"
#include "concurdl/harness/report.hpp"
#include "render/report_detail.hpp"

namespace concurdl::cli_detail {

namespace fs = std::filesystem;

int cmd_report(const Args& a) {
  if (a.targets.empty()) throw UsageError("report: give at least one run directory");
  std::vector<fs::path> paths(a.targets.begin(), a.targets.end());
  std::vector<std::string> errors;
  std::vector<RunFile> runs = load_runs(paths, errors);
  // One run given twice (DIR and DIR/results.json) would count its records twice.
  std::vector<fs::path> seen;
  std::erase_if(runs, [&](const RunFile& r) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(r.path, ec);
    if (std::find(seen.begin(), seen.end(), canonical) == seen.end()) {
      seen.push_back(canonical);
      return false;
    }
    errors.push_back(fmt::format("{}: given twice; reported once", r.path.string()));
    return true;
  });
  for (const auto& e : errors) std::fprintf(stderr, "concurdl: %s\n", e.c_str());
  if (runs.empty()) return 2;
  if (a.labels.size() > runs.size())
    throw UsageError(fmt::format("--label: {} names for {} runs", a.labels.size(), runs.size()));
  for (std::size_t i = 0; i < a.labels.size(); ++i) runs[i].label = a.labels[i];
  for (const std::string& only : a.only) {
    const auto eq = only.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == only.size())
      throw UsageError(fmt::format("--only: '{}' is not KEY=V1,V2", only));
    const std::string key = only.substr(0, eq);
    std::vector<std::string> keep;
    std::stringstream list(only.substr(eq + 1));
    for (std::string v; std::getline(list, v, ',');) keep.push_back(v);
    std::size_t kept = 0;
    for (RunFile& r : runs) {
      std::erase_if(r.records, [&](const Record& rec) {
        const auto it = rec.params.find(key);
        return it != rec.params.end() &&
               std::find(keep.begin(), keep.end(), it->second) == keep.end();
      });
      for (const Record& rec : r.records) kept += rec.params.count(key);
    }
    if (kept == 0)
      throw UsageError(fmt::format("--only: no record has {} with one of those values", key));
  }
  const bool attempts = std::any_of(runs.begin(), runs.end(),
                                    [](const RunFile& r) { return r.exercises.is_array(); });
  if (a.csv && !attempts)
    throw UsageError(
        "--csv: none of these runs is a saved exercise attempt (concurdl exercise CHAPTER --out "
        "DIR saves one)");
  fs::path out;
  if (!a.out.empty()) {
    out = a.out;
  } else if (paths.size() == 1) {
    out = fs::absolute(runs[0].path).parent_path();
  } else {
    out = make_run_dir("results/reports", "merged", fmt::format("{}runs", runs.size()));
  }
  ensure_directory(out, "report output");
  const ReportFiles rep = write_report(runs, errors, out);
  if (a.csv)
    write_file_atomic(out / "exercises.csv",
                      report_detail::exercises_csv(runs, report_detail::run_labels(runs)));
  for (const auto& w : rep.warnings) std::fprintf(stderr, "concurdl: warning: %s\n", w.c_str());
  std::cout << out.string() << std::endl;
  return errors.empty() ? 0 : 2;
}

int cmd_compare(const Args& a) {
  if (a.targets.size() != 2) throw UsageError("compare: give exactly two run directories, A and B");
  if (!a.out.empty() && fs::is_directory(a.out))
    throw UsageError(fmt::format("--out: '{}' is a directory; give the JSON file to write, e.g. {}",
                                 a.out, (fs::path(a.out) / "a-vs-b.json").string()));
  const RunFile ra = load_run(a.targets[0]);
  const RunFile rb = load_run(a.targets[1]);
  const CompareResult r = compare_runs(ra, rb);
  std::cout << format_table(r);
  fs::path out = a.out;
  if (out.empty()) {
    ensure_directory("results/compare", "compare output");
    out = fs::path("results/compare") / fmt::format("{}-vs-{}.json",
                                                    ra.path.parent_path().filename().string(),
                                                    rb.path.parent_path().filename().string());
  }
  if (out.has_parent_path()) ensure_directory(out.parent_path(), "--out");
  write_file_atomic(out, to_json(r).dump(2) + "\n");
  std::cout << out.string() << std::endl;
  return 0;
}

// `concurdl check RUN [RUN ...]`: the lessons' claims judged on each run's records; 1 when a
// law that applies does not hold in one of them (a magnitude is reported, never failed). With
// several runs, the claims x machines table follows (runs on one machine share a column).
int cmd_check(const Args& a) {
  if (a.targets.empty()) throw UsageError("check: give at least one run directory or results.json");
  std::vector<RunFile> runs;
  for (const std::string& target : a.targets) runs.push_back(load_run(target));
  for (std::size_t i = 0; i < runs.size() && i < a.labels.size(); ++i) runs[i].label = a.labels[i];
  bool failed = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunFile& f = runs[i];
    const std::vector<ClaimResult> claims = evaluate_claims(f);
    std::string machine = cpu_info::machine_summary(f.provenance);
    fmt::print("{}What this run shows: {}{}\n", i == 0 ? "" : "\n", a.targets[i],
               machine.empty() ? "" : " (" + machine + ")");
    if (std::string why = why_not_quiet(f); !why.empty())
      fmt::print("not a quiet run ({}): a failed law may be the machine's load\n", why);
    if (claims.empty()) {
      fmt::print("no experiment of this run makes a claim\n");
      continue;
    }
    fmt::print("{}", claims_text(claims));
    failed = failed || any_failed(claims);
  }
  if (runs.size() > 1)
    fmt::print("\nClaims x machines\n\n{}", claims_by_machine_markdown(group_by_machine(runs)));
  return failed ? 1 : 0;
}

}  // namespace concurdl::cli_detail
