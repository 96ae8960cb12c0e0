// Charts, the data: which records a figure draws, where each lands (x, and y with its 95% CI)
// and which series it belongs to. Models are drawn beside them by models.cpp; how it all looks
// is layout.cpp's, and the files are gnuplot.cpp's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "../report_detail.hpp"
#include "charts_detail.hpp"

namespace concurdl {

namespace report_detail {

// The run directory's name ("20250101T000000Z-host-abc1234"); `path` is results.json or the dir.
std::string run_dir_name(const RunFile& run) {
  std::filesystem::path p = run.path;
  if (p.filename() == "results.json") p = p.parent_path();
  return p.filename().string();
}

std::string provenance_text(const nlohmann::json& prov, const std::string& key) {
  if (!prov.is_object() || !prov.contains(key)) return "";
  const auto& v = prov.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

// One label per run for merged charts and tables: the name the user gave it, else the machine
// it ran on (machine_label), else its host; where two runs share that, the run directory's name
// follows it (two runs on one machine are still two series).
std::vector<std::string> run_labels(const std::vector<RunFile>& runs) {
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string label = runs[i].label;
    if (label.empty()) label = machine_label(runs[i]);
    if (label.empty()) label = provenance_text(runs[i].provenance, "host");
    labels.push_back(label);
  }
  // Runs on one kind of machine: told apart by their hosts where those differ, else by their
  // directories.
  std::map<std::string, int> count;
  std::map<std::string, std::set<std::string>> hosts;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ++count[labels[i]];
    hosts[labels[i]].insert(provenance_text(runs[i].provenance, "host"));
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (!runs[i].label.empty()) continue;  // the user's name stands as given
    if (labels[i].empty() || count[labels[i]] > 1) {
      const std::string host = provenance_text(runs[i].provenance, "host");
      const std::string tell =
          hosts[labels[i]].size() == static_cast<std::size_t>(count[labels[i]]) && !host.empty()
              ? host
              : run_dir_name(runs[i]);
      labels[i] = labels[i].empty() ? tell
                  : tell.empty()    ? labels[i]
                                    : labels[i] + " (" + tell + ")";
    }
    if (labels[i].empty()) labels[i] = fmt::format("run {}", i + 1);
  }
  // The same directory given twice is still two runs.
  std::map<std::string, int> label_count;
  for (const auto& l : labels) ++label_count[l];
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (label_count[labels[i]] > 1) labels[i] += fmt::format(" #{}", i + 1);
  return labels;
}

}  // namespace report_detail

namespace chart_detail {

std::optional<int> run_cores(const RunFile& run) {
  if (!run.provenance.is_object() || !run.provenance.contains("cores")) return std::nullopt;
  const auto& c = run.provenance.at("cores");
  if (c.is_number_integer() && c.get<long long>() > 0) return static_cast<int>(c.get<long long>());
  if (c.is_string()) {
    if (auto v = number_value(c.get<std::string>()); v && *v >= 1) return static_cast<int>(*v);
  }
  return std::nullopt;
}

namespace {

std::string stem_for(const std::string& experiment, const std::string& figure) {
  std::string s = experiment + "_" + figure;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return s;
}

// Derived metrics whose value is a constant over the metric (items/s = items / time, speedup =
// baseline / time, ...): their 95% interval is the metric's interval, mapped through.
bool scales_with_metric(const std::string& name) {
  static const std::set<std::string> names = {
      "items_per_s", "bytes_per_s",         "flops_per_s",         "speedup",
      "efficiency",  "fraction_of_ceiling", "fraction_of_roofline"};
  return names.count(name) > 0;
}

// The derived figures a record's calibrated ceiling bounds: a chart of one of them circles the
// records flagged above it (Record::notes "above_ceiling", set when the metrics are derived).
bool is_ceiling_rate(const std::string& y) {
  return y == "flops_per_s" || y == "bytes_per_s" || y == "fraction_of_ceiling";
}

// "1.27 x the calibrated peak FLOP/s" from the flag's text (its part before the reasons).
std::string ceiling_ratio(const std::string& note) {
  const auto colon = note.find(':');
  return colon == std::string::npos ? note : note.substr(0, colon);
}

std::string default_y_label(const std::string& y, const Record& r) {
  auto with_unit = [](const std::string& name, const std::string& unit) {
    return unit.empty() ? name : name + " (" + unit + ")";
  };
  if (y == "median") return with_unit(r.metric, r.unit);
  if (auto m = r.metrics.find(y); m != r.metrics.end()) return with_unit(y, m->second.unit);
  static const std::map<std::string, std::string> labels = {
      {"items_per_s", "items/s"},
      {"bytes_per_s", "bytes/s"},
      {"flops_per_s", "FLOP/s"},
      {"speedup", "speedup (×)"},
      {"efficiency", "parallel efficiency"},
      {"fraction_of_ceiling", "fraction of the measured ceiling"},
      {"fraction_of_roofline", "fraction of the device's roofline"}};
  if (auto it = labels.find(y); it != labels.end()) return it->second;
  std::string s = y;
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// A median with its own 95% CI (none recorded: the bar collapses onto the median).
ChartPoint median_point(const Summary& s) {
  const bool none = s.ci95_lo == 0 && s.ci95_hi == 0;
  return {0, s.median, none ? s.median : s.ci95_lo, none ? s.median : s.ci95_hi, ""};
}

// y and its error bar for one record. The median (of the main metric, or of a named Metric)
// carries its own 95% CI. A derived metric that is a constant over the metric takes the
// metric's CI mapped through: inversely for a time (lower is better: y*m/hi .. y*m/lo),
// proportionally otherwise. That interval reflects this configuration's spread only, not the
// baseline's, so for speedup it is a lower bound on the real uncertainty. Other derived
// metrics get no error bar.
std::optional<ChartPoint> y_of(const Record& r, const std::string& y) {
  ChartPoint pt;
  const Summary& s = r.stats;
  if (y == "median") {
    pt = median_point(s);
  } else if (auto m = r.metrics.find(y); m != r.metrics.end()) {
    if (m->second.stats.n == 0) return std::nullopt;
    pt = median_point(m->second.stats);
  } else {
    auto it = r.derived.find(y);
    if (it == r.derived.end()) return std::nullopt;
    pt.y = pt.lo = pt.hi = it->second;
    const bool has_ci = s.ci95_lo > 0 && s.ci95_hi > 0 && s.median > 0;
    if (has_ci && scales_with_metric(y)) {
      if (r.lower_is_better) {
        pt.lo = pt.y * s.median / s.ci95_hi;
        pt.hi = pt.y * s.median / s.ci95_lo;
      } else {
        pt.lo = pt.y * s.ci95_lo / s.median;
        pt.hi = pt.y * s.ci95_hi / s.median;
      }
    }
  }
  if (!std::isfinite(pt.y)) return std::nullopt;
  return pt;
}

// x for one record: the parameter named x, or else the derived metric of that name (the
// arithmetic intensity of a roofline, the elapsed time of a training curve).
std::optional<std::string> x_of(const Record& r, const std::string& x) {
  if (auto it = r.params.find(x); it != r.params.end()) return it->second;
  if (auto it = r.derived.find(x); it != r.derived.end() && std::isfinite(it->second))
    return fmt::format("{}", it->second);  // shortest text that reads back the same double
  return std::nullopt;
}

struct Selected {
  const Record* rec;
  std::size_t run;
  ChartPoint pt;
  std::string x;  // x as text
};

// Parameters other than x and the series that vary among the selected records become part of
// the series label: averaging over them would hide exactly what differs. A parameter some
// records lack (Experiment::inapplicable) varies too: "workers=-" is a configuration of its own.
std::vector<std::string> folded_parameters(const std::vector<Selected>& sel, const Figure& fig) {
  std::map<std::string, std::set<std::string>> values;
  for (const Selected& s : sel)
    for (const auto& [k, v] : s.rec->params) values[k].insert(v);
  std::vector<std::string> folded;
  for (const auto& [k, vs] : values) {
    if (k == fig.x || k == fig.series || fig.where.count(k) != 0) continue;  // fixed, or x
    if (std::find(fig.along_x.begin(), fig.along_x.end(), k) != fig.along_x.end()) continue;
    bool everywhere = true;
    for (const Selected& s : sel) everywhere = everywhere && s.rec->params.count(k);
    if (vs.size() > 1 || !everywhere) folded.push_back(k);
  }
  return folded;
}

// A series' own label: the series parameter ("v2_padded" names itself; a bare "4" does not, so
// numbers carry their name: "threads=4"), then the folded parameters.
std::string own_label(const Record& r, const Figure& fig, const std::vector<std::string>& folded) {
  std::vector<std::string> parts;
  if (auto it = r.params.find(fig.series); it != r.params.end())
    parts.push_back(number_value(it->second) ? fig.series + "=" + it->second : it->second);
  for (const auto& k : folded) {
    auto it = r.params.find(k);
    parts.push_back(k + "=" + (it == r.params.end() ? "-" : it->second));
  }
  return parts.empty() ? "measured" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

// A stacked figure: each point becomes its slice of the bar, from the running top below it
// (lo) to the new top (y and hi), the series summed in the order they were measured (the axis
// order); the layout draws each slice as a box from lo to y, and no interval.
void stack(ChartData& d) {
  std::map<double, double> top;
  for (auto& m : d.measured)
    for (ChartPoint& p : m.series.points) {
      p.lo = top[p.x];
      top[p.x] += p.y;
      p.y = p.hi = top[p.x];
    }
  d.chart.notes.push_back(
      "Stacked: each box is one series' median, stacked from the bottom up in the legend's "
      "order; the top of a bar is their sum (no confidence intervals drawn).");
}

std::optional<ChartData> measure(const std::vector<RunFile>& runs,
                                 const std::vector<std::string>& labels, const Experiment& e,
                                 const Figure& fig) {
  ChartData d;
  ChartSpec& chart = d.chart;
  chart.stem = stem_for(e.id, fig.id);
  chart.title = fig.title.empty() ? e.title + " (" + fig.id + ")" : fig.title;
  chart.experiment = e.id;
  chart.kind = fig.kind;
  chart.x_label = fig.x_label.empty() ? fig.x : fig.x_label;
  chart.log_x = fig.log_x && !is_bar_kind(fig.kind);
  chart.log_y = fig.log_y;
  d.scaling_axis = e.scaling_axis;
  d.x_is_workers = fig.x == e.scaling_axis;

  // A speedup or efficiency figure left at the default y plots what its kind names.
  d.y = fig.y;
  if (d.y == "median" && fig.kind == FigureKind::speedup) d.y = "speedup";
  if (d.y == "median" && fig.kind == FigureKind::efficiency) d.y = "efficiency";

  std::vector<Selected> sel;
  std::size_t invalid = 0;
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    for (const Record& r : runs[ri].records) {
      if (r.experiment != e.id || !where_selects(e, r.params, fig.where)) continue;
      const auto x = x_of(r, fig.x);
      if (!x) continue;
      if (!r.valid) {
        ++invalid;
        continue;
      }
      if (auto pt = y_of(r, d.y)) sel.push_back({&r, ri, *pt, *x});
    }
  }
  if (sel.empty()) return std::nullopt;
  chart.y_label = fig.y_label.empty() ? default_y_label(d.y, *sel.front().rec) : fig.y_label;
  if (invalid > 0)
    chart.notes.push_back(fmt::format("{} invalid record{} left out of this chart (see the table).",
                                      invalid, invalid == 1 ? "" : "s"));

  // x: numbers, or categories for bars and for axes that are not numeric.
  d.categorical = is_bar_kind(fig.kind);
  for (const Selected& s : sel)
    if (!number_value(s.x)) d.categorical = true;
  if (d.categorical && !is_bar_kind(fig.kind)) {
    chart.notes.push_back("'" + fig.x + "' is not numeric, so it is drawn as categories.");
    chart.log_x = false;
  }
  for (const Selected& s : sel)
    if (std::find(d.categories.begin(), d.categories.end(), s.x) == d.categories.end())
      d.categories.push_back(s.x);
  if (std::all_of(d.categories.begin(), d.categories.end(),
                  [](const std::string& c) { return number_value(c).has_value(); }))
    std::stable_sort(d.categories.begin(), d.categories.end(), [](const auto& a, const auto& b) {
      return *number_value(a) < *number_value(b);
    });

  // A record above its calibrated ceiling is circled where y is what was compared with it.
  if (is_ceiling_rate(d.y))
    for (Selected& s : sel) s.pt.above_ceiling = s.rec->notes.count("above_ceiling") > 0;

  const std::vector<std::string> folded = folded_parameters(sel, fig);
  std::map<std::pair<std::string, std::string>, int> seen;  // (label, x) -> times seen
  std::vector<std::string> above;  // the circled points, named for the chart's note
  for (Selected& s : sel) {
    const std::string own = own_label(*s.rec, fig, folded);
    std::string label = runs.size() > 1 ? labels[s.run] + ": " + own : own;
    // The same configuration measured again in one run is a second series, not a zigzag.
    if (const int k = seen[{label, s.x}]++; k > 0) label += fmt::format(" (repeat {})", k + 1);

    if (d.categorical) {
      s.pt.x = static_cast<double>(std::find(d.categories.begin(), d.categories.end(), s.x) -
                                   d.categories.begin());
      s.pt.x_label = s.x;
    } else {
      s.pt.x = *number_value(s.x);
    }
    auto it = std::find_if(d.measured.begin(), d.measured.end(),
                           [&](const Measured& m) { return m.series.label == label; });
    if (it == d.measured.end()) {
      d.measured.push_back({ChartSeries{label, {}, false}, s.run, own, {}});
      it = d.measured.end() - 1;
    }
    it->series.points.push_back(s.pt);
    it->at_x.emplace(s.pt.x, s.rec);
    if (s.pt.above_ceiling) {
      // Where it is: x (a derived x, such as the intensity, rounded) and what varies along x.
      std::string at = s.rec->params.count(fig.x) ? s.x : fmt::format("{:.4g}", s.pt.x);
      at = fig.x + " = " + at;
      for (const auto& k : fig.along_x)
        if (auto v = s.rec->params.find(k); v != s.rec->params.end())
          at += ", " + k + " = " + v->second;
      above.push_back(
          fmt::format("{} at {} ({})", label, at, ceiling_ratio(s.rec->notes.at("above_ceiling"))));
    }
  }
  if (!above.empty()) {
    constexpr std::size_t kNamed = 6;
    std::string named = fmt::format(
        "{}", fmt::join(above.begin(), above.begin() + std::min(above.size(), kNamed), "; "));
    if (above.size() > kNamed) named += fmt::format("; and {} more", above.size() - kNamed);
    chart.notes.push_back(fmt::format(
        "{} point{} above the calibrated ceiling (circled in red): {}. Such a measurement is "
        "suspect: the calibration may have been disturbed (another program running while it "
        "measured), or the declared work is wrong; a speedup above the CPUs the run had was "
        "timed wrongly or against a slow baseline (see the records' notes).",
        above.size(), above.size() == 1 ? " lies" : "s lie", named));
  }
  if (fig.kind == FigureKind::stacked) stack(d);
  bool first = true;
  for (auto& m : d.measured) {
    std::stable_sort(m.series.points.begin(), m.series.points.end(),
                     [](const ChartPoint& a, const ChartPoint& c) { return a.x < c.x; });
    for (const auto& p : m.series.points) {
      d.xmin = first ? p.x : std::min(d.xmin, p.x);
      d.xmax = first ? p.x : std::max(d.xmax, p.x);
      first = false;
    }
    chart.series.push_back(m.series);
  }
  return d;
}

}  // namespace chart_detail

std::vector<ChartSpec> build_charts(const std::vector<RunFile>& runs) {
  const auto labels = report_detail::run_labels(runs);
  // Experiments in order of first appearance: the order the runs measured them.
  std::vector<std::string> ids;
  for (const auto& run : runs)
    for (const auto& r : run.records)
      if (std::find(ids.begin(), ids.end(), r.experiment) == ids.end()) ids.push_back(r.experiment);
  std::vector<ChartSpec> charts;
  for (const auto& id : ids) {
    const Experiment* e = find_experiment(id);
    if (!e) continue;  // its figures are unknown; the report still tables its records
    for (const Figure& fig : e->figures) {
      auto d = chart_detail::measure(runs, labels, *e, fig);
      if (!d) continue;
      // Measured series first, then the models: the harness's overlays, then the chapter's.
      chart_detail::add_overlays(*d, runs, labels, fig);
      chart_detail::add_models(*d, runs, labels, fig);
      charts.push_back(std::move(d->chart));
    }
  }
  return charts;
}

}  // namespace concurdl
