// `concurdl compare RUN_A RUN_B`: per configuration present in both, the ratio of medians
// (B / A) with a 95% bootstrap CI and a Mann–Whitney U verdict.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "concurdl/harness/records.hpp"
#include "concurdl/harness/stats.hpp"

namespace concurdl {

struct Comparison {
  std::string experiment;
  Params params;
  std::string metric, unit;
  double median_a = 0, median_b = 0;
  Ratio ratio;  // median_b / median_a
  MannWhitney test;
  std::string verdict;  // "faster", "slower", "same" (B relative to A), "invalid"
};

// Configurations are matched on experiment id and parameters; those in only one run are
// listed in `only_a` / `only_b`. Verdict: p < 0.05 and the CI excludes 1, otherwise "same";
// "faster" honours each record's lower_is_better.
struct CompareResult {
  std::vector<Comparison> rows;
  std::vector<std::string> only_a, only_b;
};
CompareResult compare_runs(const RunFile& a, const RunFile& b);

std::string format_table(const CompareResult& r);  // for stdout
nlohmann::json to_json(const CompareResult& r);    // written next to the runs

}  // namespace concurdl
