// `concurdl compare RUN_A RUN_B`: pairs the configurations of two runs and says, per pair,
// whether B is faster, slower or the same as A. A verdict needs both a significant rank test and
// a ratio CI that excludes 1, so noise alone does not produce "faster".
#include "concurdl/harness/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace concurdl {

namespace {

using Key = std::pair<std::string, Params>;  // experiment, parameters

std::string describe_config(const Record& r) {
  return fmt::format("{} {{{}}}", r.experiment, describe(r.params));
}

// A ratio between different metrics or units (time vs bytes/s, s vs ms) means nothing.
bool same_quantity(const Record& a, const Record& b) {
  return a.metric == b.metric && a.unit == b.unit && a.lower_is_better == b.lower_is_better;
}

Comparison compare_pair(const Record& a, const Record& b) {
  Comparison c;
  c.experiment = a.experiment;
  c.params = a.params;
  c.metric = a.metric;
  c.unit = a.unit;
  if (a.samples.empty() || b.samples.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    c.median_a = a.samples.empty() ? nan : median(a.samples);
    c.median_b = b.samples.empty() ? nan : median(b.samples);
    c.ratio = {nan, nan, nan};
    c.verdict = "invalid";
    return c;
  }
  c.median_a = median(a.samples);
  c.median_b = median(b.samples);
  c.ratio = ratio_of_medians(b.samples, a.samples);
  c.test = mann_whitney(b.samples, a.samples);

  if (!a.valid || !b.valid || !same_quantity(a, b)) {
    c.verdict = "invalid";
  } else if (c.test.p_value < 0.05 && (c.ratio.hi < 1 || c.ratio.lo > 1)) {
    const bool b_lower = c.ratio.hi < 1;
    c.verdict = b_lower == a.lower_is_better ? "faster" : "slower";
  } else {
    c.verdict = "same";
  }
  return c;
}

std::string pad(const std::string& s, std::size_t width) { return fmt::format("{:<{}}", s, width); }

}  // namespace

CompareResult compare_runs(const RunFile& a, const RunFile& b) {
  // Candidates in B per configuration, in file order. A run may hold the same configuration
  // more than once (several metrics): pair equal metrics first, then in order.
  std::map<Key, std::vector<std::size_t>> in_b;
  for (std::size_t i = 0; i < b.records.size(); ++i)
    in_b[{b.records[i].experiment, b.records[i].params}].push_back(i);
  std::vector<bool> used(b.records.size(), false);

  CompareResult out;
  for (const Record& ra : a.records) {
    auto it = in_b.find({ra.experiment, ra.params});
    std::size_t match = b.records.size();
    if (it != in_b.end()) {
      for (std::size_t i : it->second) {
        if (used[i]) continue;
        if (match == b.records.size()) match = i;
        if (b.records[i].metric == ra.metric) {
          match = i;
          break;
        }
      }
    }
    if (match == b.records.size()) {
      out.only_a.push_back(describe_config(ra));
      continue;
    }
    used[match] = true;
    out.rows.push_back(compare_pair(ra, b.records[match]));
  }
  for (std::size_t i = 0; i < b.records.size(); ++i)
    if (!used[i]) out.only_b.push_back(describe_config(b.records[i]));
  return out;
}

std::string format_table(const CompareResult& r) {
  const std::vector<std::string> head = {"experiment", "params", "median A", "median B",
                                         "B/A",        "95% CI", "p",        "verdict"};
  std::vector<std::vector<std::string>> cells;
  for (const Comparison& c : r.rows) {
    const std::string unit = c.unit.empty() ? "" : " " + c.unit;
    cells.push_back({c.experiment, describe(c.params), fmt::format("{:.4g}{}", c.median_a, unit),
                     fmt::format("{:.4g}{}", c.median_b, unit),
                     fmt::format("{:.3f}", c.ratio.value),
                     fmt::format("[{:.3f}, {:.3f}]", c.ratio.lo, c.ratio.hi),
                     fmt::format("{:.3g}", c.test.p_value), c.verdict});
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t k = 0; k < head.size(); ++k) width[k] = head[k].size();
  for (const auto& row : cells)
    for (std::size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());

  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (std::size_t k = 0; k < row.size(); ++k) {
      if (k > 0) s += "  ";
      s += k + 1 < row.size() ? pad(row[k], width[k]) : row[k];  // no trailing blanks
    }
    return s + "\n";
  };

  std::string out;
  if (cells.empty()) {
    out += "no configuration is in both runs\n";
  } else {
    out += line(head);
    for (const auto& row : cells) out += line(row);
  }
  auto list_only = [&](const std::vector<std::string>& names, const char* which) {
    out += fmt::format("{} configuration{} only in {}\n", names.size(),
                       names.size() == 1 ? "" : "s", which);
    for (const std::string& n : names) out += "  " + n + "\n";
  };
  list_only(r.only_a, "A");
  list_only(r.only_b, "B");
  return out;
}

nlohmann::json to_json(const CompareResult& r) {
  using nlohmann::json;
  json rows = json::array();
  for (const Comparison& c : r.rows) {
    rows.push_back({{"experiment", c.experiment},
                    {"params", c.params},
                    {"metric", c.metric},
                    {"unit", c.unit},
                    {"median_a", c.median_a},
                    {"median_b", c.median_b},
                    {"ratio", c.ratio.value},
                    {"ratio_ci95", {c.ratio.lo, c.ratio.hi}},
                    {"u", c.test.u},
                    {"z", c.test.z},
                    {"p_value", c.test.p_value},
                    {"verdict", c.verdict}});
  }
  return {{"rows", rows}, {"only_a", r.only_a}, {"only_b", r.only_b}};
}

}  // namespace concurdl
