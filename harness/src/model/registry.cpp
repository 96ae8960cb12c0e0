// The registries of experiments and chapters, filled by static initializers in each chapter's
// experiments.cpp (object libraries, so the linker keeps them).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/experiment.hpp"

namespace concurdl {

namespace {

// Function-local statics: registration happens during static initialisation of other
// translation units, whose order is unspecified.
std::vector<Experiment>& experiment_list() {
  static std::vector<Experiment> list;
  return list;
}
std::vector<ChapterInfo>& chapter_list() {
  static std::vector<ChapterInfo> list;
  return list;
}

void check_declaration(const Experiment& e) {
  auto fail = [&](const std::string& why) {
    throw std::logic_error(fmt::format("experiment '{}': {}", e.id, why));
  };
  if (e.id.empty() || e.id.find('/') == std::string::npos) fail("id must look like 'ch01/name'");
  if (e.chapter.empty()) fail("no chapter");
  if (!e.prepare && e.recorded_by.empty() && e.microbenchmark_filter.empty())
    fail("no prepare function");
  for (const Axis& a : e.axes) {
    if (a.values.empty()) fail("axis '" + a.name + "' has no values");
    if ((a.max != 0 || a.min) && a.kind == AxisKind::text)
      fail("axis '" + a.name + "' has a max or a min but is not a numeric axis");
    if (a.min && a.max != 0 && *a.min > a.max)
      fail("axis '" + a.name + "' has a min above its max");
    for (const auto& v : a.values) check_axis_value(a, v);
    for (const auto& v : a.quick) check_axis_value(a, v);
  }
  auto has_axis = [&](const std::string& n) {
    return std::any_of(e.axes.begin(), e.axes.end(), [&](const Axis& a) { return a.name == n; });
  };
  // The harness's own derived metrics (runner.cpp, derive_metrics) and the experiment's.
  auto is_derived = [&](const std::string& n) {
    static const std::vector<std::string> own = {
        "items_per_s",     "bytes_per_s",         "flops_per_s", "intensity",
        "speedup",         "efficiency",          "karp_flatt",  "fraction_of_ceiling",
        "roofline_time_s", "fraction_of_roofline"};
    return std::find(own.begin(), own.end(), n) != own.end() ||
           std::find(e.derived.begin(), e.derived.end(), n) != e.derived.end();
  };
  auto is_metric = [&](const std::string& n) {
    return std::any_of(e.metrics.begin(), e.metrics.end(),
                       [&](const Metric& m) { return m.name == n; });
  };
  for (const Metric& m : e.metrics) {
    if (m.name.empty() || m.name == e.metric) fail("a named metric needs a name of its own");
    if (has_axis(m.name) || is_derived(m.name))
      fail("metric '" + m.name + "' shadows an axis or a derived metric");
  }
  for (const auto& [k, v] : e.baseline)
    if (!has_axis(k)) fail("baseline names '" + k + "', which is not an axis");
  if (e.mpi && !has_axis("ranks")) fail("an MPI experiment needs a 'ranks' axis");
  for (const Inapplicable& rule : e.inapplicable) {
    for (const auto& [k, v] : rule.when)
      if (!has_axis(k)) fail("an inapplicable rule's condition names '" + k + "', not an axis");
    for (const auto& a : rule.axes)
      if (!has_axis(a)) fail("an inapplicable rule names '" + a + "', not an axis");
  }
  for (const Claim& c : e.claims) {
    if (c.id.empty() || c.statement.empty()) fail("a claim needs an id and a statement");
    if (std::count_if(e.claims.begin(), e.claims.end(),
                      [&](const Claim& o) { return o.id == c.id; }) > 1)
      fail("claim '" + c.id + "' declared twice");
    if (c.select.empty()) fail("claim '" + c.id + "' selects no records (select is empty)");
    for (const auto* params : {&c.select, &c.versus})
      for (const auto& [k, v] : *params)
        if (!has_axis(k)) fail("claim '" + c.id + "' names '" + k + "', which is not an axis");
    if (c.field != "median" && !is_metric(c.field) && !is_derived(c.field))
      fail("claim '" + c.id + "' has field '" + c.field +
           "', neither the metric, a named metric nor a derived metric");
    if (!std::isfinite(c.bound)) fail("claim '" + c.id + "' has a bound that is not a number");
    // A magnitude is reported, never judged: a bound would read as a promise it does not make;
    // and it says what it depends on, which is the point of reporting it.
    if (c.kind == Claim::Kind::magnitude && (c.bound != 0 || c.causes.empty()))
      fail("claim '" + c.id + "' is a magnitude: it takes no bound and names its causes");
  }
  for (const Figure& f : e.figures) {
    if (f.id.empty()) fail("a figure without an id");
    if (!has_axis(f.x) && !is_derived(f.x))
      fail("figure '" + f.id + "' has x = '" + f.x + "', neither an axis nor a derived metric");
    if (!f.series.empty() && !has_axis(f.series))
      fail("figure '" + f.id + "' has series = '" + f.series + "', not an axis");
    if (f.y != "median" && !is_metric(f.y) && !is_derived(f.y))
      fail("figure '" + f.id + "' has y = '" + f.y +
           "', neither the metric, a named metric nor a derived metric");
    if ((f.kind == FigureKind::speedup || f.kind == FigureKind::efficiency) && has_axis(f.x) &&
        f.x != e.scaling_axis)
      fail("figure '" + f.id + "' charts scaling along '" + f.x + "' but the scaling axis is '" +
           e.scaling_axis + "' (set Experiment::scaling_axis)");
    for (const Model& m : f.models)
      if (m.label.empty() || !m.y)
        fail("figure '" + f.id + "' has a model without a label or a y function");
  }
}

}  // namespace

bool register_experiment(Experiment e) {
  check_declaration(e);
  if (find_experiment(e.id)) throw std::logic_error("experiment '" + e.id + "' registered twice");
  register_chapter({e.chapter, ""});
  auto& list = experiment_list();
  list.push_back(std::move(e));
  std::sort(list.begin(), list.end(),
            [](const Experiment& a, const Experiment& b) { return a.id < b.id; });
  return true;
}

const std::vector<Experiment>& experiments() { return experiment_list(); }

Params applicable_params(const Experiment& e, Params p) {
  for (const Inapplicable& rule : e.inapplicable)
    if (params_match(p, rule.when))
      for (const auto& axis : rule.axes) p.erase(axis);
  return p;
}

bool where_selects(const Experiment& e, const Params& record, const Params& where) {
  for (const auto& [k, v] : where) {
    if (const auto it = record.find(k); it != record.end()) {
      if (it->second != v) return false;
      continue;
    }
    Params probe = record;
    probe[k] = v;
    if (applicable_params(e, std::move(probe)).count(k) != 0) return false;
  }
  return true;
}

const Experiment* find_experiment(const std::string& id) {
  for (const auto& e : experiment_list())
    if (e.id == id) return &e;
  return nullptr;
}

bool register_chapter(ChapterInfo c) {
  auto& list = chapter_list();
  for (auto& existing : list) {
    if (existing.folder != c.folder) continue;
    if (existing.title.empty()) existing.title = c.title;
    return true;
  }
  list.push_back(std::move(c));
  std::sort(list.begin(), list.end(),
            [](const ChapterInfo& a, const ChapterInfo& b) { return a.folder < b.folder; });
  return true;
}

const std::vector<ChapterInfo>& chapters() { return chapter_list(); }

namespace {
// "007" -> "7", "0" -> "0"; compared as text, so no number is ever too long.
std::string strip_zeros(const std::string& digits) {
  const auto first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}
bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}
}  // namespace

const ChapterInfo* find_chapter(const std::string& name) {
  std::string digits = name;
  if (digits.rfind("ch", 0) == 0) digits = digits.substr(2);
  const bool numeric = all_digits(digits);
  for (const auto& c : chapter_list()) {
    if (c.folder == name) return &c;
    const std::string num = c.folder.substr(0, c.folder.find('-'));
    if (numeric && all_digits(num) && strip_zeros(num) == strip_zeros(digits)) return &c;
  }
  return nullptr;
}

namespace {
std::vector<std::string> powers_of_two_to(unsigned limit, unsigned also) {
  std::vector<unsigned> v;
  for (unsigned p = 1; p <= limit; p *= 2) v.push_back(p);
  if (std::find(v.begin(), v.end(), also) == v.end()) v.push_back(also);
  std::sort(v.begin(), v.end());
  std::vector<std::string> out;
  for (unsigned p : v) out.push_back(std::to_string(p));
  return out;
}

// The hardware threads, but never more than an axis of threads takes (kMaxThreads).
unsigned threads_within_limit() {
  return std::min(hardware_threads(), static_cast<unsigned>(kMaxThreads));
}
}  // namespace

std::vector<std::string> thread_counts() {
  const unsigned hw = threads_within_limit();
  return powers_of_two_to(std::min(std::max(8u, 2 * hw), static_cast<unsigned>(kMaxThreads)), hw);
}

std::vector<std::string> thread_counts_up_to_cores() {
  const unsigned hw = threads_within_limit();
  return powers_of_two_to(hw, hw);
}

std::vector<std::pair<const Experiment*, std::string>> unavailable_here(
    const std::vector<const Experiment*>& selected) {
  std::vector<std::pair<const Experiment*, std::string>> out;
  for (const Experiment* e : selected) {
    if (!e->unavailable) continue;
    std::string why = e->unavailable();
    if (!why.empty()) out.emplace_back(e, std::move(why));
  }
  return out;
}

}  // namespace concurdl
