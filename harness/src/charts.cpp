// Charts: turn records into series (measured first, analytical models after) and draw them with
// gnuplot. Every chart leaves STEM.dat and a standalone STEM.gp beside its STEM.svg / STEM.png,
// so anyone can restyle it with `gnuplot STEM.gp` in the figures directory.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"
#include "report_detail.hpp"

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

// One label per run for merged charts and tables: its host, or its directory name where two
// runs share a host (two runs on one machine are still two series).
std::vector<std::string> run_labels(const std::vector<RunFile>& runs) {
  std::map<std::string, int> host_count;
  for (const auto& r : runs) ++host_count[provenance_text(r.provenance, "host")];
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string label = provenance_text(runs[i].provenance, "host");
    if (label.empty() || host_count[label] > 1) label = run_dir_name(runs[i]);
    if (label.empty()) label = fmt::format("run {}", i + 1);
    labels.push_back(label);
  }
  // The same directory given twice is still two runs.
  std::map<std::string, int> label_count;
  for (const auto& l : labels) ++label_count[l];
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (label_count[labels[i]] > 1) labels[i] += fmt::format(" #{}", i + 1);
  return labels;
}

}  // namespace report_detail

namespace {

using report_detail::run_labels;

// Parameter values are text: "8", "1048576", "1M" (binary suffixes, as AxisKind::size), "0.5".
std::optional<double> parse_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  std::string rest(end);
  double scale = 1;
  if (rest == "K" || rest == "k")
    scale = 1024.0;
  else if (rest == "M")
    scale = 1024.0 * 1024;
  else if (rest == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (!rest.empty())
    return std::nullopt;
  return v * scale;
}

std::optional<int> run_cores(const RunFile& run) {
  if (!run.provenance.is_object() || !run.provenance.contains("cores")) return std::nullopt;
  const auto& c = run.provenance.at("cores");
  if (c.is_number_integer() && c.get<long long>() > 0) return static_cast<int>(c.get<long long>());
  if (c.is_string()) {
    if (auto v = parse_number(c.get<std::string>()); v && *v >= 1) return static_cast<int>(*v);
  }
  return std::nullopt;
}

std::string stem_for(const std::string& experiment, const std::string& figure) {
  std::string s = experiment + "_" + figure;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return s;
}

// Derived metrics whose value is a constant over the metric (items/s = items / time, speedup =
// baseline / time, ...): their 95% interval is the metric's interval, mapped through.
bool scales_with_metric(const std::string& name) {
  static const std::set<std::string> names = {"items_per_s", "bytes_per_s", "flops_per_s",
                                              "speedup",     "efficiency",  "fraction_of_ceiling"};
  return names.count(name) > 0;
}

std::string default_y_label(const std::string& y, const Record& r) {
  if (y == "median") return r.unit.empty() ? r.metric : r.metric + " (" + r.unit + ")";
  static const std::map<std::string, std::string> labels = {
      {"items_per_s", "items/s"},
      {"bytes_per_s", "bytes/s"},
      {"flops_per_s", "FLOP/s"},
      {"speedup", "speedup (×)"},
      {"efficiency", "parallel efficiency"},
      {"fraction_of_ceiling", "fraction of the measured ceiling"}};
  if (auto it = labels.find(y); it != labels.end()) return it->second;
  std::string s = y;
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// y and its error bar for one record. The median carries its own 95% CI. A derived metric that
// is a constant over the metric takes the metric's CI mapped through: inversely for a time
// (lower is better: y*m/hi .. y*m/lo), proportionally otherwise. That interval reflects this
// configuration's spread only, not the baseline's, so for speedup it is a lower bound on the
// real uncertainty. Other derived metrics get no error bar.
std::optional<ChartPoint> y_of(const Record& r, const std::string& y) {
  ChartPoint pt;
  const Summary& s = r.stats;
  const bool has_ci = s.ci95_lo > 0 && s.ci95_hi > 0 && s.median > 0;
  if (y == "median") {
    const bool none = s.ci95_lo == 0 && s.ci95_hi == 0;
    pt.y = s.median;
    pt.lo = none ? s.median : s.ci95_lo;
    pt.hi = none ? s.median : s.ci95_hi;
  } else {
    auto it = r.derived.find(y);
    if (it == r.derived.end()) return std::nullopt;
    pt.y = pt.lo = pt.hi = it->second;
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

bool matches(const Params& params, const Params& where) {
  for (const auto& [k, v] : where) {
    auto it = params.find(k);
    if (it == params.end() || it->second != v) return false;
  }
  return true;
}

// A measured series under construction, remembering its run (for the core count and ceilings).
struct Building {
  ChartSeries series;
  std::size_t run = 0;
};

std::string fmt_f(double f) { return fmt::format("{:.3g}", f); }

// x positions for a model curve over [lo, hi]: geometric on a log axis, so it looks smooth.
std::vector<double> sample_range(double lo, double hi, bool log_axis, int n = 48) {
  std::vector<double> xs;
  if (!(hi > lo)) return {lo};
  for (int i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / (n - 1);
    xs.push_back(log_axis && lo > 0 ? lo * std::pow(hi / lo, t) : lo + (hi - lo) * t);
  }
  return xs;
}

ChartSeries model(std::string label, const std::vector<double>& xs, auto&& f) {
  ChartSeries s;
  s.label = std::move(label);
  s.is_model = true;
  for (double x : xs) {
    const double y = f(x);
    if (std::isfinite(y)) s.points.push_back({x, y, y, y, ""});
  }
  return s;
}

std::string overlay_name(Overlay o) {
  switch (o) {
    case Overlay::ideal:
      return "ideal";
    case Overlay::amdahl:
      return "amdahl";
    case Overlay::gustafson:
      return "gustafson";
    case Overlay::mem_ceiling:
      return "mem_ceiling";
    case Overlay::flops_ceiling:
      return "flops_ceiling";
    case Overlay::roofline:
      return "roofline";
  }
  return "?";
}

std::optional<ChartSpec> build_one(const std::vector<RunFile>& runs,
                                   const std::vector<std::string>& labels, const Experiment& e,
                                   const Figure& fig) {
  ChartSpec chart;
  chart.stem = stem_for(e.id, fig.id);
  chart.title = fig.title.empty() ? e.title + " (" + fig.id + ")" : fig.title;
  chart.experiment = e.id;
  chart.kind = fig.kind;
  chart.x_label = fig.x_label.empty() ? fig.x : fig.x_label;
  chart.log_x = fig.log_x && fig.kind != FigureKind::bars;
  chart.log_y = fig.log_y;

  // A speedup or efficiency figure left at the default y plots what its kind names.
  std::string y = fig.y;
  if (y == "median" && fig.kind == FigureKind::speedup) y = "speedup";
  if (y == "median" && fig.kind == FigureKind::efficiency) y = "efficiency";

  struct Sel {
    const Record* rec;
    std::size_t run;
    ChartPoint pt;
  };
  std::vector<Sel> sel;
  std::size_t invalid = 0;
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    for (const Record& r : runs[ri].records) {
      if (r.experiment != e.id || !matches(r.params, fig.where) || !x_of(r, fig.x)) continue;
      if (!r.valid) {
        ++invalid;
        continue;
      }
      if (auto pt = y_of(r, y)) sel.push_back({&r, ri, *pt});
    }
  }
  if (sel.empty()) return std::nullopt;
  chart.y_label = fig.y_label.empty() ? default_y_label(y, *sel.front().rec) : fig.y_label;
  if (invalid > 0)
    chart.notes.push_back(fmt::format("{} invalid record{} left out of this chart (see the table).",
                                      invalid, invalid == 1 ? "" : "s"));

  // Parameters other than x and the series that vary among the selected records become part of
  // the series label: averaging over them would hide exactly what differs.
  std::map<std::string, std::set<std::string>> values;
  for (const Sel& s : sel)
    for (const auto& [k, v] : s.rec->params) values[k].insert(v);
  std::vector<std::string> folded;
  for (const auto& [k, vs] : values) {
    if (k == fig.x || k == fig.series) continue;
    if (std::find(fig.along_x.begin(), fig.along_x.end(), k) != fig.along_x.end()) continue;
    bool everywhere = true;
    for (const Sel& s : sel) everywhere = everywhere && s.rec->params.count(k);
    if (vs.size() > 1 || !everywhere) folded.push_back(k);
  }

  // x: numbers, or categories for bars and for axes that are not numeric.
  bool categorical = fig.kind == FigureKind::bars;
  for (const Sel& s : sel)
    if (!parse_number(*x_of(*s.rec, fig.x))) categorical = true;
  if (categorical && fig.kind != FigureKind::bars) {
    chart.notes.push_back("'" + fig.x + "' is not numeric, so it is drawn as categories.");
    chart.log_x = false;
  }
  std::vector<std::string> categories;
  for (const Sel& s : sel) {
    const std::string v = *x_of(*s.rec, fig.x);
    if (std::find(categories.begin(), categories.end(), v) == categories.end())
      categories.push_back(v);
  }
  if (std::all_of(categories.begin(), categories.end(),
                  [](const std::string& c) { return parse_number(c).has_value(); }))
    std::stable_sort(categories.begin(), categories.end(), [](const auto& a, const auto& b) {
      return *parse_number(a) < *parse_number(b);
    });

  std::vector<Building> measured;
  std::map<std::pair<std::string, std::string>, int> seen;  // (label, x) -> times seen
  for (Sel& s : sel) {
    std::vector<std::string> parts;
    // "v2_padded" names itself; a bare "4" does not, so numbers carry their name: "threads=4".
    if (auto it = s.rec->params.find(fig.series); it != s.rec->params.end())
      parts.push_back(parse_number(it->second) ? fig.series + "=" + it->second : it->second);
    for (const auto& k : folded) {
      auto it = s.rec->params.find(k);
      parts.push_back(k + "=" + (it == s.rec->params.end() ? "-" : it->second));
    }
    std::string label = parts.empty() ? "measured" : fmt::format("{}", fmt::join(parts, ", "));
    if (runs.size() > 1) label = labels[s.run] + ": " + label;
    const std::string xv = *x_of(*s.rec, fig.x);
    // The same configuration measured again in one run is a second series, not a zigzag.
    if (const int k = seen[{label, xv}]++; k > 0) label += fmt::format(" (repeat {})", k + 1);

    if (categorical) {
      s.pt.x = static_cast<double>(std::find(categories.begin(), categories.end(), xv) -
                                   categories.begin());
      s.pt.x_label = xv;
    } else {
      s.pt.x = *parse_number(xv);
    }
    auto it = std::find_if(measured.begin(), measured.end(),
                           [&](const Building& b) { return b.series.label == label; });
    if (it == measured.end()) {
      measured.push_back({ChartSeries{label, {}, false}, s.run});
      it = measured.end() - 1;
    }
    it->series.points.push_back(s.pt);
  }
  double xmin = 0, xmax = 0;
  bool first = true;
  for (auto& b : measured) {
    std::stable_sort(b.series.points.begin(), b.series.points.end(),
                     [](const ChartPoint& a, const ChartPoint& c) { return a.x < c.x; });
    for (const auto& p : b.series.points) {
      xmin = first ? p.x : std::min(xmin, p.x);
      xmax = first ? p.x : std::max(xmax, p.x);
      first = false;
    }
  }
  for (auto& b : measured) chart.series.push_back(b.series);

  // Overlays: models beside the measurements, never in place of them.
  std::vector<Overlay> overlays = fig.overlays;
  if (overlays.empty() && fig.kind == FigureKind::speedup)
    overlays = {Overlay::ideal, Overlay::amdahl};

  // Amdahl's serial fraction per measured series, fitted on the points within the run's cores:
  // beyond them threads share cores, which no scaling law models.
  std::vector<double> fitted(measured.size(), -1);
  const bool want_fit = std::any_of(overlays.begin(), overlays.end(), [](Overlay o) {
    return o == Overlay::amdahl || o == Overlay::gustafson;
  });
  if (want_fit && !categorical && y == "speedup") {
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const auto cores = run_cores(runs[measured[i].run]);
      std::vector<double> xs, ss;
      std::size_t beyond = 0;
      for (const auto& p : measured[i].series.points) {
        if (cores && p.x > *cores) {
          ++beyond;
          continue;
        }
        xs.push_back(p.x);
        ss.push_back(p.y);
      }
      fitted[i] = amdahl_fit(xs, ss);
      const std::string& name = measured[i].series.label;
      const auto& all = measured[i].series.points;
      const bool scaled =
          std::any_of(all.begin(), all.end(), [](const auto& p) { return p.x > 1; });
      if (fitted[i] < 0 && !scaled) continue;  // a lone p = 1 point: nothing to fit, nothing to say
      if (fitted[i] < 0) {
        chart.notes.push_back("No Amdahl fit for " + name + ": no point with p > 1" +
                              (cores ? fmt::format(" and p <= {} (the cores)", *cores) : "") + ".");
        continue;
      }
      std::string where = cores ? fmt::format("fitted on p <= {}, the core count of {}", *cores,
                                              labels[measured[i].run])
                                : "fitted on all points (the run does not record its core count)";
      if (beyond > 0) where += "; points beyond are oversubscribed and not fitted";
      chart.notes.push_back(fmt::format("Amdahl fit ({}): serial fraction f = {}, {}.", name,
                                        fmt_f(fitted[i]), where));
    }
  } else if (want_fit) {
    chart.notes.push_back("Amdahl/Gustafson overlays need y = speedup over a numeric x; skipped.");
  }

  for (Overlay o : overlays) {
    const bool line_overlay =
        o == Overlay::ideal || o == Overlay::amdahl || o == Overlay::gustafson;
    if (line_overlay && categorical) {
      chart.notes.push_back("The '" + overlay_name(o) + "' overlay needs a numeric x; skipped.");
      continue;
    }
    switch (o) {
      case Overlay::ideal: {
        // Efficiency's ideal is 1; speedup's (and anything else's) is S(p) = p.
        const bool eff = fig.kind == FigureKind::efficiency || y == "efficiency";
        chart.series.push_back(model(eff ? "ideal (efficiency = 1)" : "ideal (S = p)",
                                     sample_range(xmin, xmax, chart.log_x, chart.log_x ? 48 : 2),
                                     [&](double x) { return eff ? 1.0 : x; }));
        break;
      }
      case Overlay::amdahl:
      case Overlay::gustafson:
        for (std::size_t i = 0; i < measured.size(); ++i) {
          if (fitted[i] < 0) continue;
          const auto& pts = measured[i].series.points;
          const double f = fitted[i];
          const bool amdahl = o == Overlay::amdahl;
          const std::string label =
              fmt::format("{} ({}): f = {}", amdahl ? "Amdahl fit" : "Gustafson, Amdahl-fitted f",
                          measured[i].series.label, fmt_f(f));
          chart.series.push_back(model(
              label, sample_range(pts.front().x, pts.back().x, chart.log_x),
              [&](double p) { return amdahl ? amdahl_speedup(f, p) : gustafson_speedup(f, p); }));
        }
        break;
      case Overlay::mem_ceiling:
      case Overlay::flops_ceiling:
        for (std::size_t ri = 0; ri < runs.size(); ++ri) {
          const bool mem = o == Overlay::mem_ceiling;
          const double c = mem ? runs[ri].calibration.mem_bandwidth_bytes_per_s
                               : runs[ri].calibration.peak_flops;
          if (c <= 0) continue;
          std::string label = mem ? "measured memory bandwidth (calibrate)"
                                  : "measured peak FLOP/s, all cores (calibrate)";
          if (runs.size() > 1) label = labels[ri] + ": " + label;
          const double lo = categorical ? -0.5 : xmin;
          const double hi = categorical ? static_cast<double>(categories.size()) - 0.5 : xmax;
          chart.series.push_back(model(label, {lo, hi}, [&](double) { return c; }));
        }
        break;
      case Overlay::roofline:
        if (categorical || fig.x != "intensity" || y != "flops_per_s") {
          chart.notes.push_back("The roofline overlay needs x = intensity and y = flops_per_s; skipped.");
          break;
        }
        for (std::size_t ri = 0; ri < runs.size(); ++ri) {
          if (std::none_of(measured.begin(), measured.end(),
                           [&](const Building& b) { return b.run == ri; }))
            continue;  // a merged run with no points in this chart
          const double peak = runs[ri].calibration.peak_flops;
          const double bw = runs[ri].calibration.mem_bandwidth_bytes_per_s;
          if (peak <= 0 || bw <= 0) {
            chart.notes.push_back("No roofline for " + labels[ri] +
                                  ": the run has no calibration (run without --no-calibrate).");
            continue;
          }
          // The ridge point: the intensity where the memory roof meets the compute roof.
          const double ridge = peak / bw;
          std::string label = fmt::format("roofline: min({} GFLOP/s, {} GB/s × intensity)",
                                          fmt_f(peak / 1e9), fmt_f(bw / 1e9));
          if (runs.size() > 1) label = labels[ri] + ": " + label;
          const double lo = std::min(xmin, ridge / 4), hi = std::max(xmax, ridge * 4);
          std::vector<double> xs = sample_range(lo, hi, chart.log_x);
          xs.push_back(ridge);
          std::sort(xs.begin(), xs.end());
          chart.series.push_back(model(label, xs, [&](double x) { return std::min(peak, x * bw); }));
          chart.notes.push_back(fmt::format(
              "Roofline of {} from its calibration: ridge at {} FLOP/byte; to the left of it a "
              "kernel moving only its compulsory bytes is bound by memory, to the right by compute.",
              labels[ri], fmt_f(ridge)));
        }
        break;
    }
  }

  // Karp–Flatt: the serial fraction each point implies. Constant e means a real serial part;
  // e growing with p means overhead (synchronisation, memory traffic) that grows with p.
  if (fig.kind == FigureKind::speedup && y == "speedup" && !categorical) {
    for (const auto& b : measured) {
      std::vector<std::string> parts;
      for (const auto& p : b.series.points)
        if (p.x > 1 && p.y > 0)
          parts.push_back(fmt::format("p={}: {}", p.x, fmt_f(karp_flatt(p.y, p.x))));
      if (!parts.empty())
        chart.notes.push_back(fmt::format("Karp–Flatt serial fraction e(p) for {}: {}.",
                                          b.series.label, fmt::join(parts, ", ")));
    }
  }
  return chart;
}

// ---- rendering ----

// A gnuplot double-quoted string: backslashes and quotes escaped, no line breaks. Labels are
// drawn `noenhanced`, so underscores and carets stay literal.
std::string gp_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

std::string dat_label(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  std::replace(s.begin(), s.end(), '\n', ' ');
  s.insert(s.begin(), '"');
  s.push_back('"');
  return s;
}

std::string num(double v) { return fmt::format("{:.10g}", v); }

struct GnuplotResult {
  bool ran = false;  // found and started
  int status = 0;    // exit status
  std::string error;
};

std::optional<std::string> find_gnuplot() {
  // CONCURDL_GNUPLOT overrides (a path, or empty to switch charts off); then the configured
  // path; then PATH.
  if (const char* env = std::getenv("CONCURDL_GNUPLOT")) {
    if (*env == '\0' || ::access(env, X_OK) != 0) return std::nullopt;
    return std::filesystem::absolute(env).string();  // gnuplot runs in the figures directory
  }
  const std::string configured = build::gnuplot;
  if (!configured.empty() && configured.find("NOTFOUND") == std::string::npos &&
      ::access(configured.c_str(), X_OK) == 0)
    return configured;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const std::string candidate = (d.empty() ? "." : d) + "/gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// Run `gnuplot script` in `dir` (the script names its files relatively); `script` and `log`
// are names inside `dir`.
GnuplotResult run_gnuplot(const std::string& exe, const std::filesystem::path& dir,
                          const std::string& script, const std::string& log) {
  GnuplotResult res;
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  const std::string dir_s = dir.string();
  std::vector<std::string> args = {exe, script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    res.error = std::string("fork failed: ") + std::strerror(errno);
    return res;
  }
  if (pid == 0) {
    if (::chdir(dir_s.c_str()) != 0) ::_exit(126);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      res.error = std::string("waitpid failed: ") + std::strerror(errno);
      return res;
    }
  }
  res.ran = true;
  res.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

std::string last_line_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    const auto start = line.find_first_not_of(" \t^");
    if (start != std::string::npos) last = line.substr(start);
  }
  return last;
}

bool non_empty_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && std::filesystem::file_size(p, ec) > 0 && !ec;
}

// The measured series whose colour a model takes: "Amdahl fit (NAME): ..." belongs to NAME.
int owner_of(const ChartSeries& m, const std::vector<const ChartSeries*>& measured) {
  int best = -1;
  std::size_t best_len = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const std::string key = "(" + measured[i]->label + ")";
    if (m.label.find(key) != std::string::npos && key.size() > best_len) {
      best = static_cast<int>(i);
      best_len = key.size();
    }
  }
  return best;
}

bool has_error_bars(const ChartSeries& s) {
  return std::any_of(s.points.begin(), s.points.end(),
                     [](const ChartPoint& p) { return p.lo != p.y || p.hi != p.y; });
}

std::string write_dat(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn,
                      bool bars) {
  std::string out;
  out += "# concurdl chart data: " + chart.title + "\n";
  out += "# experiment " + chart.experiment + ", drawn by " + chart.stem + ".gp\n";
  out += "# x: " + chart.x_label + "; y: " + chart.y_label + "\n";
  out += bars ? "# columns: x (category index) y lo hi x_label\n" : "# columns: x y lo hi\n";
  out += "# lo/hi: the 95% confidence interval (equal to y where there is none)\n";
  out += "# one block per series, separated by two blank lines (gnuplot: index 0, 1, ...)\n";
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const ChartSeries& s = *drawn[i];
    // Two blank lines end a block: gnuplot's `index N` selects series N.
    out += fmt::format("{}# index {}\n# series: {}\n# kind: {}\n", i == 0 ? "" : "\n\n", i, s.label,
                       s.is_model ? "model" : "measured");
    for (const auto& p : s.points) {
      out += num(p.x) + " " + num(p.y) + " " + num(p.lo) + " " + num(p.hi);
      if (bars) {
        out += ' ';
        out += dat_label(p.x_label.empty() ? num(p.x) : p.x_label);
      }
      out += "\n";
    }
  }
  return out;
}

// Where an inside key fits: the first corner of the plot (in the order that suits the chart)
// whose box, estimated from the label lengths at 800x500 and 11 pt, covers nothing drawn.
// Positions are estimated in graph fractions with gnuplot's autoscaling approximated (whole
// decades or powers of two on log axes, zero at the bottom of linear ones).
std::optional<std::string> free_corner(const ChartSpec& chart,
                                       const std::vector<const ChartSeries*>& drawn,
                                       double log_x_base, std::size_t longest, std::size_t entries,
                                       double font_scale) {
  if (chart.kind == FigureKind::bars) return std::nullopt;  // bars fill the bottom, tops vary
  const double w = font_scale * ((static_cast<double>(longest) + 10) * 7 + 10) / 690;
  const double h = font_scale * (static_cast<double>(entries) * 17 + 12) / 400;
  if (w > 0.6 || h > 0.6) return std::nullopt;

  double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  bool first = true;
  for (const auto* s : drawn)
    for (const auto& p : s->points) {
      if ((chart.log_x && p.x <= 0) || (chart.log_y && p.lo <= 0)) continue;
      x0 = first ? p.x : std::min(x0, p.x);
      x1 = first ? p.x : std::max(x1, p.x);
      y0 = first ? p.lo : std::min(y0, p.lo);
      y1 = first ? p.hi : std::max(y1, p.hi);
      first = false;
    }
  if (first) return std::nullopt;
  auto span = [](double& lo, double& hi, bool log, double base) {
    if (log) {
      lo = std::pow(base, std::floor(std::log(lo) / std::log(base)));
      hi = std::pow(base, std::ceil(std::log(hi) / std::log(base)));
      lo = std::log(lo);
      hi = std::log(hi);
    }
    if (hi <= lo) hi = lo + 1;
  };
  if (!chart.log_y && y0 >= 0) y0 = 0;
  span(x0, x1, chart.log_x, log_x_base);
  span(y0, y1, chart.log_y, 10);
  auto fx = [&](double x) { return ((chart.log_x ? std::log(x) : x) - x0) / (x1 - x0); };
  auto fy = [&](double y) { return ((chart.log_y ? std::log(y) : y) - y0) / (y1 - y0); };

  const std::vector<std::string> order =
      chart.kind == FigureKind::speedup
          ? std::vector<std::string>{"top left", "bottom right", "top right", "bottom left"}
          : std::vector<std::string>{"top right", "top left", "bottom right", "bottom left"};
  for (const auto& corner : order) {
    const bool top = corner.rfind("top", 0) == 0;
    const bool left = corner.find("left") != std::string::npos;
    const double m = 0.03;  // keep a little air around the key
    const double bx0 = left ? 0 : 1 - w - m, bx1 = left ? w + m : 1;
    const double by0 = top ? 1 - h - m : 0, by1 = top ? 1 : h + m;
    auto inside = [&](double x, double y) { return x >= bx0 && x <= bx1 && y >= by0 && y <= by1; };
    bool covered = false;
    for (const auto* s : drawn) {
      for (std::size_t i = 0; i < s->points.size() && !covered; ++i) {
        const auto& p = s->points[i];
        if ((chart.log_x && p.x <= 0) || (chart.log_y && p.lo <= 0)) continue;
        // The point with its error bar, and the line to the next point.
        for (int k = 0; k <= 8 && !covered; ++k)
          covered = inside(fx(p.x), fy(p.lo) + (fy(p.hi) - fy(p.lo)) * k / 8);
        if (i + 1 < s->points.size()) {
          const auto& q = s->points[i + 1];
          if ((chart.log_x && q.x <= 0) || (chart.log_y && q.y <= 0)) continue;
          for (int k = 1; k < 32 && !covered; ++k) {
            const double t = k / 32.0;
            covered = inside(fx(p.x) + (fx(q.x) - fx(p.x)) * t, fy(p.y) + (fy(q.y) - fy(p.y)) * t);
          }
        }
      }
      if (covered) break;
    }
    if (!covered) return corner;
  }
  return std::nullopt;
}

std::string write_gp(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn) {
  const std::string dat = "'" + chart.stem + ".dat'";
  std::vector<const ChartSeries*> measured;
  for (const auto* s : drawn)
    if (!s->is_model) measured.push_back(s);

  // Categories (bars, or a non-numeric x): tics from the labels the points carry.
  std::map<double, std::string> categories;
  for (const auto* s : measured)
    for (const auto& p : s->points)
      if (!p.x_label.empty()) categories.emplace(p.x, p.x_label);
  const bool bars = chart.kind == FigureKind::bars;

  double xmax = 0, ymax = 0, ymin_pos = 0;
  bool y_negative = false;
  std::set<double> measured_x;
  bool integer_x = true;
  for (const auto* s : measured)
    for (const auto& p : s->points) {
      measured_x.insert(p.x);
      integer_x = integer_x && p.x == std::floor(p.x);
    }
  for (const auto* s : drawn)
    for (const auto& p : s->points) {
      y_negative = y_negative || p.lo < 0;
      xmax = std::max(xmax, std::abs(p.x));
      ymax = std::max(ymax, std::abs(p.hi));
      if (p.y > 0) ymin_pos = ymin_pos == 0 ? p.y : std::min(ymin_pos, p.y);
    }

  std::string g;
  g += "# concurdl chart: " + chart.title + " (experiment " + chart.experiment + ")\n";
  g += "# Re-run in the figures directory: gnuplot " + chart.stem + ".gp\n";
  g += "# It reads " + chart.stem + ".dat and writes " + chart.stem + ".svg and " + chart.stem +
       ".png; restyle freely.\n";
  for (const auto& n : chart.notes) g += "# note: " + n + "\n";
  g += "\nset encoding utf8\n";
  g += "set terminal svg size 800,500 dynamic enhanced font 'sans,11'\n";
  g += "set output '" + chart.stem + ".svg'\n\n";
  g += "set title " + gp_string(chart.title) + " noenhanced\n";
  g += "set xlabel " + gp_string(chart.x_label) + " noenhanced\n";
  g += "set ylabel " + gp_string(chart.y_label) + " noenhanced\n";
  g += "set grid\n";
  // The key goes inside the plot, in the first corner where it covers no point, error bar or
  // line; failing that, under the plot, pinned to the bottom edge (gnuplot's `set key below`
  // draws over the x label), with a bottom margin for the rows it wraps into (~95 characters).
  std::size_t longest = 0;
  for (const auto* s : drawn) longest = std::max(longest, s->label.size());
  const std::size_t entries = drawn.size();
  const double log_x_base = xmax > 1024 ? 10 : 2;
  // A long key may still fit inside in smaller type (9 pt instead of 11).
  if (auto corner = free_corner(chart, drawn, log_x_base, longest, entries, 1.0)) {
    g += "set key inside " + *corner + " box opaque noenhanced\n";
  } else if (auto small = free_corner(chart, drawn, log_x_base, longest, entries, 0.82)) {
    g += "set key inside " + *small + " box opaque noenhanced font ',9' spacing 0.95\n";
  } else {
    const std::size_t per_row = std::max<std::size_t>(1, 95 / (longest + 9));
    const std::size_t rows = (entries + per_row - 1) / per_row;
    g += fmt::format(
        "set key at screen 0.5, screen 0.01 center bottom horizontal maxcols {} Left reverse "
        "noenhanced\n",
        per_row);
    g += fmt::format("set bmargin {:.1f}\n", 3.5 + 1.05 * static_cast<double>(rows));
  }
  if (chart.log_x) g += fmt::format("set logscale x {}\n", log_x_base);
  if (chart.log_y) g += "set logscale y\n";
  if (chart.log_x && xmax >= 1e4) g += "set format x \"%.0s%c\"\n";
  // SI prefixes on the y tics for very large or small values (1.2G rather than 1.2x10^9).
  if (chart.log_y && (ymax >= 1e4 || (ymin_pos > 0 && ymin_pos < 1e-2)))
    g += "set format y \"%.0s%c\"\n";
  else if (ymax >= 1e4 || (ymax > 0 && ymax < 1e-2))
    g += "set format y \"%.1s%c\"\n";
  // A linear y axis starts at zero, so a 5% difference does not look like a factor of two.
  if (!chart.log_y && !y_negative) g += "set yrange [0:*]\n";
  if (categories.empty() && !chart.log_x) {
    // Thread and rank counts are integers: tics on them, not at 1.2, 1.4, ...
    if (integer_x && measured_x.size() <= 16 && *measured_x.rbegin() - *measured_x.begin() <= 32) {
      std::vector<std::string> tics;
      for (double x : measured_x) tics.push_back(num(x));
      g += fmt::format("set xtics ({})\n", fmt::join(tics, ", "));
    }
    // Keep the end points and their error bars off the frame.
    g += "set offsets graph 0.02, graph 0.02, 0, 0\n";
  }
  if (!categories.empty()) {
    std::vector<std::string> tics;
    for (const auto& [x, label] : categories) tics.push_back(gp_string(label) + " " + num(x));
    // Long category names (variant names) collide when laid flat: tilt them when the row of
    // labels would not fit in the plot's width (about 90 characters at 800 px).
    std::size_t label_chars = 0;
    for (const auto& [x, label] : categories) label_chars += label.size() + 2;
    const bool tilt = label_chars > 90;
    g += fmt::format("set xtics ({}) noenhanced{}\n", fmt::join(tics, ", "),
                     tilt ? " rotate by -30 left" : "");
    if (tilt) g += "set bmargin 7\n";
    g += fmt::format("set xrange [-0.5:{}]\n", num(categories.rbegin()->first + 0.5));
  }
  if (bars) g += "set style fill solid 0.75 border -1\n";
  // gnuplot's default line types repeat their colours after 8, and a ladder of ten variants is
  // common here: twelve distinct colours (matplotlib's tab10 plus two), and past twelve series a
  // different point shape for each round of colours.
  static constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                             "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                             "#bcbd22", "#17becf", "#000080", "#808000"};
  constexpr int kColours = static_cast<int>(std::size(kPalette));
  for (int i = 0; i < kColours; ++i)
    g += fmt::format("set linetype {} lc rgb '{}'\n", i + 1, kPalette[i]);
  g += fmt::format("set linetype cycle {}\n", kColours);
  auto point_type = [&](int colour) {
    static constexpr int kShapes[] = {7, 5, 9, 11, 13};  // filled circle, square, triangles, diamond
    return kShapes[((colour - 1) / kColours) % 5];
  };

  // Measured series take colours 1..n; a fitted model takes its series' colour, dashed; the
  // other models (ideal, ceilings) are grey, each with its own dash pattern.
  std::vector<std::string> clauses;
  const double n_bars = static_cast<double>(measured.size());
  const double width = bars ? 0.8 / std::max(1.0, n_bars) : 0;
  int measured_i = 0, grey_i = 0;
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const ChartSeries& s = *drawn[i];
    const std::string src = dat + " index " + std::to_string(i);
    const std::string title = " title " + gp_string(s.label);
    if (s.is_model) {
      const int owner = owner_of(s, measured);
      // Amdahl dashed, Gustafson dash-dotted, when both are fitted to one series.
      const int dash = s.label.rfind("Gustafson", 0) == 0 ? 4 : 2;
      const std::string style =
          owner >= 0 ? fmt::format("lt {} dt {} lw 1.5", owner + 1, dash)
                     : fmt::format("lc rgb '#404040' dt {} lw 1.5", 3 + (grey_i++ % 3));
      clauses.push_back(src + " using 1:2 with lines " + style + title);
      continue;
    }
    const int colour = ++measured_i;
    if (bars) {
      const double offset = (measured_i - 1 - (n_bars - 1) / 2.0) * width;
      const std::string x = fmt::format("($1{:+.4f})", offset);
      clauses.push_back(src + " using " + x + ":2:(" + num(width) + ") with boxes lt " +
                        std::to_string(colour) + title);
      if (has_error_bars(s))
        clauses.push_back(src + " using " + x +
                          ":2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle");
    } else if (has_error_bars(s)) {
      clauses.push_back(
          src + fmt::format(" using 1:2:3:4 with yerrorlines lt {} lw 2 pt {} ps 0.8", colour,
                            point_type(colour)) +
          title);
    } else {
      clauses.push_back(
          src + fmt::format(" using 1:2 with linespoints lt {} lw 2 pt {} ps 0.8", colour,
                            point_type(colour)) +
          title);
    }
  }
  g += "\nplot " + fmt::format("{}", fmt::join(clauses, ", \\\n     ")) + "\n\n";
  g += "set terminal pngcairo size 800,500 enhanced font 'sans,11'\n";
  g += "set output '" + chart.stem + ".png'\n";
  g += "replot\n";
  g += "unset output\n";
  return g;
}

void write_text(const std::filesystem::path& p, const std::string& content) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + p.string() + ": " + std::strerror(errno));
}

}  // namespace

std::vector<ChartSpec> build_charts(const std::vector<RunFile>& runs) {
  const auto labels = run_labels(runs);
  // Experiments in order of first appearance: the order the runs measured them.
  std::vector<std::string> ids;
  for (const auto& run : runs)
    for (const auto& r : run.records)
      if (std::find(ids.begin(), ids.end(), r.experiment) == ids.end()) ids.push_back(r.experiment);
  std::vector<ChartSpec> charts;
  for (const auto& id : ids) {
    const Experiment* e = find_experiment(id);
    if (!e) continue;
    for (const Figure& fig : e->figures)
      if (auto c = build_one(runs, labels, *e, fig)) charts.push_back(std::move(*c));
  }
  return charts;
}

ChartFiles render_chart(const ChartSpec& chart, const std::filesystem::path& dir,
                        std::string& warning) {
  warning.clear();
  std::filesystem::create_directories(dir);
  ChartFiles files;
  files.dat = dir / (chart.stem + ".dat");
  files.gp = dir / (chart.stem + ".gp");
  const auto svg = dir / (chart.stem + ".svg");
  const auto png = dir / (chart.stem + ".png");
  const auto log = dir / (chart.stem + ".log");

  // Empty series would be empty blocks, which gnuplot's `index` cannot address.
  std::vector<const ChartSeries*> drawn;
  for (const auto& s : chart.series)
    if (!s.points.empty()) drawn.push_back(&s);
  const bool bars = chart.kind == FigureKind::bars;
  write_text(files.dat, write_dat(chart, drawn, bars));
  const bool any_measured =
      std::any_of(drawn.begin(), drawn.end(), [](const ChartSeries* s) { return !s->is_model; });
  if (!any_measured) {
    write_text(files.gp,
               "# concurdl chart: " + chart.title + "\n# No measured points: nothing to plot.\n");
    warning = chart.stem + ": no measured points, no picture";
    return files;
  }
  write_text(files.gp, write_gp(chart, drawn));

  // Stale pictures from an earlier report must not pass for this one.
  std::error_code ec;
  std::filesystem::remove(svg, ec);
  std::filesystem::remove(png, ec);
  const auto exe = find_gnuplot();
  if (!exe) {
    warning =
        "gnuplot not found (install gnuplot-nox): charts have data and scripts but no "
        "pictures";
    return files;
  }
  const auto res = run_gnuplot(*exe, dir, files.gp.filename().string(), log.filename().string());
  if (!res.ran) {
    warning = "could not run gnuplot for " + chart.stem + ": " + res.error;
    return files;
  }
  if (res.status == 127) {
    warning = "could not execute " + *exe + " for " + chart.stem;
    return files;
  }
  if (res.status != 0) {
    warning = fmt::format("gnuplot failed on {}.gp (exit {}): {} (see {}.log)", chart.stem,
                          res.status, last_line_of(log), chart.stem);
    return files;
  }
  if (non_empty_file(svg)) files.svg = svg;
  if (non_empty_file(png)) files.png = png;
  if (files.svg.empty() || files.png.empty()) {
    warning = fmt::format("gnuplot ran on {}.gp but left no {} (see {}.log)", chart.stem,
                          files.svg.empty() ? "SVG" : "PNG", chart.stem);
    return files;
  }
  std::filesystem::remove(log, ec);
  return files;
}

}  // namespace concurdl
