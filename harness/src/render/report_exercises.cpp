// Class results: exercise attempts saved by `concurdl exercise --out`, merged by `concurdl
// report` into one table and one chart per exercise (a row, a bar per attempt), and a CSV.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "concurdl/harness/cpu_info.hpp"
#include "report_detail.hpp"

namespace concurdl::report_detail {

namespace {

using json = nlohmann::json;

std::string text(const json& j, const char* key) {
  if (!j.contains(key)) return "";
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{:.4g}", v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return "";
}

double number(const json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : 0.0;
}

struct Row {
  std::size_t run;
  const json* attempt;
};

// Exercise id -> its attempts, ids in exercise order ("1.2" before "1.10").
std::vector<std::pair<std::string, std::vector<Row>>> by_exercise(
    const std::vector<RunFile>& runs) {
  std::vector<std::pair<std::string, std::vector<Row>>> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].exercises.is_array()) continue;
    for (const json& x : runs[i].exercises) {
      const std::string id = text(x, "id");
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == id; });
      if (it == out.end()) it = out.insert(out.end(), {id, {}});
      it->second.push_back({i, &x});
    }
  }
  auto key = [](const std::string& id) {
    std::vector<long> parts;
    for (std::size_t pos = 0; pos <= id.size();) {
      const std::size_t dot = std::min(id.find('.', pos), id.size());
      parts.push_back(std::strtol(id.substr(pos, dot - pos).c_str(), nullptr, 10));
      pos = dot + 1;
    }
    return parts;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return key(a.first) < key(b.first); });
  return out;
}

std::string cost_text(const json& x) {
  if (!x.contains("cost")) return "—";
  std::string s = fmt::format("{:.2f}×", number(x, "cost"));
  if (x.contains("cost_ci95") && x.at("cost_ci95").is_array() && x.at("cost_ci95").size() == 2)
    s += fmt::format(" [{:.2f}, {:.2f}]", x.at("cost_ci95")[0].get<double>(),
                     x.at("cost_ci95")[1].get<double>());
  return s;
}

std::string machine(const RunFile& run) {
  const std::string m = cpu_info::machine_summary(run.provenance);
  return m.empty() ? "?" : m;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::vector<ChartSpec> exercise_charts(const std::vector<RunFile>& runs,
                                       const std::vector<std::string>& labels) {
  std::vector<ChartSpec> out;
  for (const auto& [id, rows] : by_exercise(runs)) {
    ChartSpec c;
    c.stem = "exercise_" + id;
    std::replace(c.stem.begin(), c.stem.end(), '.', '_');
    c.experiment = "exercise/" + id;
    c.title = fmt::format("Exercise {}: the student's cost over the reference's, per attempt", id);
    c.kind = FigureKind::bars;
    c.x_label = "attempt";
    c.y_label = "cost ratio (student / reference; 95% CI)";
    ChartSeries cost{.label = "cost ratio"};
    double target = 0;
    for (const Row& r : rows) {
      target = std::max(target, number(*r.attempt, "target"));
      if (!r.attempt->contains("cost")) continue;
      ChartPoint p;
      p.x = static_cast<double>(cost.points.size());
      p.y = p.lo = p.hi = number(*r.attempt, "cost");
      if (r.attempt->contains("cost_ci95") && r.attempt->at("cost_ci95").is_array() &&
          r.attempt->at("cost_ci95").size() == 2) {
        p.lo = r.attempt->at("cost_ci95")[0].get<double>();
        p.hi = r.attempt->at("cost_ci95")[1].get<double>();
      }
      p.x_label = labels[r.run];
      cost.points.push_back(p);
    }
    if (cost.points.empty()) continue;  // nobody's attempt was timed
    c.series.push_back(std::move(cost));
    c.notes.push_back(fmt::format(
        "The target: {:.2g}×. Done when the whole interval is at or below it; correct but slow "
        "when all of it is above; inconclusive in between.",
        target));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ExerciseSection> exercise_sections(const std::vector<RunFile>& runs,
                                               const std::vector<std::string>& labels) {
  std::vector<ExerciseSection> out;
  for (const auto& [id, rows] : by_exercise(runs)) {
    ExerciseSection es;
    es.id = id;
    es.title = text(*rows.front().attempt, "title");
    es.anchor = "exercise-" + id;
    std::replace(es.anchor.begin(), es.anchor.end(), '.', '-');
    Table& t = es.attempts;
    t.head = {"attempt",
              "machine",
              "tests passed / failed / skipped",
              "verdict",
              "cost (student / reference)",
              "target",
              "configuration"};
    t.numeric = {false, false, true, false, true, true, false};
    std::map<std::string, int> verdicts;
    for (const Row& r : rows) {
      const json& x = *r.attempt;
      ++verdicts[text(x, "verdict")];
      t.rows.push_back({labels[r.run], machine(runs[r.run]),
                        fmt::format("{} / {} / {}", text(x, "tests_passed"),
                                    text(x, "tests_failed"), text(x, "tests_skipped")),
                        text(x, "verdict"), cost_text(x),
                        x.contains("target") ? fmt::format("{:.2g}×", number(x, "target")) : "—",
                        text(x, "configuration")});
    }
    out.push_back(std::move(es));
  }
  return out;
}

std::string exercises_csv(const std::vector<RunFile>& runs,
                          const std::vector<std::string>& labels) {
  std::string csv =
      "attempt,host,machine,exercise,title,verdict,passes,tests_passed,tests_failed,"
      "tests_skipped,cost,cost_lo,cost_hi,target,configuration\n";
  for (const auto& [id, rows] : by_exercise(runs))
    for (const Row& r : rows) {
      const json& x = *r.attempt;
      std::string lo, hi;
      if (x.contains("cost_ci95") && x.at("cost_ci95").is_array() &&
          x.at("cost_ci95").size() == 2) {
        lo = fmt::format("{:.4g}", x.at("cost_ci95")[0].get<double>());
        hi = fmt::format("{:.4g}", x.at("cost_ci95")[1].get<double>());
      }
      const std::vector<std::string> fields = {labels[r.run],
                                               provenance_text(runs[r.run].provenance, "host"),
                                               machine(runs[r.run]),
                                               id,
                                               text(x, "title"),
                                               text(x, "verdict"),
                                               text(x, "passes"),
                                               text(x, "tests_passed"),
                                               text(x, "tests_failed"),
                                               text(x, "tests_skipped"),
                                               text(x, "cost"),
                                               lo,
                                               hi,
                                               text(x, "target"),
                                               text(x, "configuration")};
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (i > 0) csv += ',';
        csv += csv_field(fields[i]);  // not "," + field: GCC 12 warns (-Wrestrict) on that
      }
      csv += "\n";
    }
  return csv;
}

}  // namespace concurdl::report_detail
