// Charts, the models: what is drawn beside the measurements, never in place of them. The
// harness's overlays (ideal line, Amdahl and Gustafson fits, calibrated ceilings, roofline) and
// the experiment's own analytical curves (Figure::models), each labelled as a model.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <exception>

#include "charts_detail.hpp"
#include "concurdl/harness/stats.hpp"

namespace concurdl::chart_detail {

namespace {

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

ChartSeries curve(std::string label, const std::vector<double>& xs, auto&& f) {
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

// Amdahl's serial fraction per measured series (-1: none), fitted on the points within the
// run's cores: beyond them workers share cores, which no scaling law models.
std::vector<double> fit_serial_fractions(ChartData& d, const std::vector<RunFile>& runs,
                                         const std::vector<std::string>& labels) {
  std::vector<double> fitted(d.measured.size(), -1);
  for (std::size_t i = 0; i < d.measured.size(); ++i) {
    const Measured& m = d.measured[i];
    const auto cores = run_cores(runs[m.run]);
    std::vector<double> xs, ss;
    std::size_t beyond = 0;
    for (const auto& p : m.series.points) {
      if (cores && p.x > *cores) {
        ++beyond;
        continue;
      }
      xs.push_back(p.x);
      ss.push_back(p.y);
    }
    fitted[i] = amdahl_fit(xs, ss);
    const std::string& name = m.series.label;
    const auto& all = m.series.points;
    const bool scaled = std::any_of(all.begin(), all.end(), [](const auto& p) { return p.x > 1; });
    if (fitted[i] < 0 && !scaled) continue;  // a lone p = 1 point: nothing to fit, nothing to say
    if (fitted[i] < 0) {
      d.chart.notes.push_back("No Amdahl fit for " + name + ": no point with p > 1" +
                              (cores ? fmt::format(" and p <= {} (the cores)", *cores) : "") + ".");
      continue;
    }
    std::string where =
        cores ? fmt::format("fitted on p <= {}, the core count of {}", *cores, labels[m.run])
              : "fitted on all points (the run does not record its core count)";
    if (beyond > 0) where += "; points beyond are oversubscribed and not fitted";
    d.chart.notes.push_back(
        fmt::format("Amdahl fit ({}): serial fraction f = {}, {}.", name, fmt_f(fitted[i]), where));
  }
  return fitted;
}

// Calibrated ceilings (memory bandwidth, peak FLOP/s) as horizontal lines, one per run.
void add_ceiling(ChartData& d, const std::vector<RunFile>& runs,
                 const std::vector<std::string>& labels, bool mem) {
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    const double c =
        mem ? runs[ri].calibration.mem_bandwidth_bytes_per_s : runs[ri].calibration.peak_flops;
    if (c <= 0) continue;
    std::string label = mem ? "measured memory bandwidth (calibrate)"
                            : "measured peak FLOP/s, all cores (calibrate)";
    if (runs.size() > 1) label = labels[ri] + ": " + label;
    const double lo = d.categorical ? -0.5 : d.xmin;
    const double hi = d.categorical ? static_cast<double>(d.categories.size()) - 0.5 : d.xmax;
    d.chart.series.push_back(curve(label, {lo, hi}, [&](double) { return c; }));
  }
}

// min(peak FLOP/s, intensity x memory bandwidth), from each run's calibration.
void add_roofline(ChartData& d, const std::vector<RunFile>& runs,
                  const std::vector<std::string>& labels) {
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    if (std::none_of(d.measured.begin(), d.measured.end(),
                     [&](const Measured& m) { return m.run == ri; }))
      continue;  // a merged run with no points in this chart
    const double peak = runs[ri].calibration.peak_flops;
    const double bw = runs[ri].calibration.mem_bandwidth_bytes_per_s;
    if (peak <= 0 || bw <= 0) {
      d.chart.notes.push_back("No roofline for " + labels[ri] +
                              ": the run has no calibration (run without --no-calibrate).");
      continue;
    }
    // The ridge point: the intensity where the memory roof meets the compute roof.
    const double ridge = peak / bw;
    std::string label = fmt::format("roofline: min({} GFLOP/s, {} GB/s × intensity)",
                                    fmt_f(peak / 1e9), fmt_f(bw / 1e9));
    if (runs.size() > 1) label = labels[ri] + ": " + label;
    const double lo = std::min(d.xmin, ridge / 4), hi = std::max(d.xmax, ridge * 4);
    std::vector<double> xs = sample_range(lo, hi, d.chart.log_x);
    xs.push_back(ridge);
    std::sort(xs.begin(), xs.end());
    d.chart.series.push_back(curve(label, xs, [&](double x) { return std::min(peak, x * bw); }));
    d.chart.notes.push_back(fmt::format(
        "Roofline of {} from its calibration: ridge at {} FLOP/byte; to the left of it a "
        "kernel moving only its compulsory bytes is bound by memory, to the right by compute.",
        labels[ri], fmt_f(ridge)));
  }
}

// Karp–Flatt: the serial fraction each point implies. Constant e means a real serial part;
// e growing with p means overhead (synchronisation, memory traffic) that grows with p.
void add_karp_flatt_notes(ChartData& d) {
  for (const auto& m : d.measured) {
    std::vector<std::string> parts;
    for (const auto& p : m.series.points)
      if (p.x > 1 && p.y > 0)
        parts.push_back(fmt::format("p={}: {}", p.x, fmt_f(karp_flatt(p.y, p.x))));
    if (!parts.empty())
      d.chart.notes.push_back(fmt::format("Karp–Flatt serial fraction e(p) for {}: {}.",
                                          m.series.label, fmt::join(parts, ", ")));
  }
}

}  // namespace

void add_overlays(ChartData& d, const std::vector<RunFile>& runs,
                  const std::vector<std::string>& labels, const Figure& fig) {
  ChartSpec& chart = d.chart;
  std::vector<Overlay> overlays = fig.overlays;
  if (overlays.empty() && fig.kind == FigureKind::speedup)
    overlays = {Overlay::ideal, Overlay::amdahl};

  // Efficiency's ideal is 1 whatever x is; speedup's, S(p) = p, and the scaling laws hold only
  // where x counts the workers.
  const bool eff = fig.kind == FigureKind::efficiency || d.y == "efficiency";
  auto needs_workers = [&](Overlay o) {
    return o == Overlay::amdahl || o == Overlay::gustafson || (o == Overlay::ideal && !eff);
  };
  if (!d.x_is_workers && !d.categorical &&
      std::any_of(overlays.begin(), overlays.end(), needs_workers)) {
    chart.notes.push_back(fmt::format(
        "'{0}' is not this experiment's worker count (its scaling_axis is '{1}'): the ideal line "
        "and the Amdahl/Gustafson fits are drawn only against '{1}'. If '{0}' counts the workers, "
        "the experiment should declare scaling_axis = \"{0}\".",
        fig.x, d.scaling_axis));
    std::erase_if(overlays, needs_workers);
  }

  std::vector<double> fitted(d.measured.size(), -1);
  const bool want_fit = std::any_of(overlays.begin(), overlays.end(), [](Overlay o) {
    return o == Overlay::amdahl || o == Overlay::gustafson;
  });
  if (want_fit && !d.categorical && d.y == "speedup")
    fitted = fit_serial_fractions(d, runs, labels);
  else if (want_fit)
    chart.notes.push_back("Amdahl/Gustafson overlays need y = speedup over a numeric x; skipped.");

  for (Overlay o : overlays) {
    const bool line_overlay =
        o == Overlay::ideal || o == Overlay::amdahl || o == Overlay::gustafson;
    if (line_overlay && d.categorical) {
      chart.notes.push_back("The '" + overlay_name(o) + "' overlay needs a numeric x; skipped.");
      continue;
    }
    switch (o) {
      case Overlay::ideal:
        chart.series.push_back(
            curve(eff ? "ideal (efficiency = 1)" : "ideal (S = p)",
                  sample_range(d.xmin, d.xmax, chart.log_x, chart.log_x ? 48 : 2),
                  [&](double x) { return eff ? 1.0 : x; }));
        break;
      case Overlay::amdahl:
      case Overlay::gustafson:
        for (std::size_t i = 0; i < d.measured.size(); ++i) {
          if (fitted[i] < 0) continue;
          const auto& pts = d.measured[i].series.points;
          const double f = fitted[i];
          const bool amdahl = o == Overlay::amdahl;
          ChartSeries s = curve(
              fmt::format("{} ({}): f = {}", amdahl ? "Amdahl fit" : "Gustafson, Amdahl-fitted f",
                          d.measured[i].series.label, fmt_f(f)),
              sample_range(pts.front().x, pts.back().x, chart.log_x),
              [&](double p) { return amdahl ? amdahl_speedup(f, p) : gustafson_speedup(f, p); });
          s.owner = d.measured[i].series.label;
          chart.series.push_back(std::move(s));
        }
        break;
      case Overlay::mem_ceiling:
      case Overlay::flops_ceiling:
        add_ceiling(d, runs, labels, o == Overlay::mem_ceiling);
        break;
      case Overlay::roofline:
        if (d.categorical || fig.x != "intensity" || d.y != "flops_per_s") {
          chart.notes.push_back(
              "The roofline overlay needs x = intensity and y = flops_per_s; skipped.");
          break;
        }
        add_roofline(d, runs, labels);
        break;
    }
  }
  if (fig.kind == FigureKind::speedup && d.y == "speedup" && !d.categorical && d.x_is_workers)
    add_karp_flatt_notes(d);
}

void add_models(ChartData& d, const std::vector<RunFile>& runs,
                const std::vector<std::string>& labels, const Figure& fig) {
  if (fig.models.empty()) return;
  ChartSpec& chart = d.chart;
  // A bar's x is a category, not a value a model could be evaluated at: models are drawn on
  // lines, speedup and efficiency figures only.
  if (d.categorical) {
    std::vector<std::string> names;
    for (const Model& m : fig.models) names.push_back(m.label);
    chart.notes.push_back(fmt::format("Models are drawn over a numeric x only; not drawn here: {}.",
                                      fmt::join(names, ", ")));
    return;
  }
  for (const Model& m : fig.models) {
    // One curve per run: each run's measurements and calibration are its own.
    for (std::size_t ri = 0; ri < runs.size(); ++ri) {
      const std::string run = runs.size() > 1 ? " (" + labels[ri] + ")" : "";
      const std::string label = "model: " + m.label + run;
      bool in_chart = false;
      std::vector<const Measured*> follow;
      for (const Measured& ms : d.measured) {
        if (ms.run != ri) continue;
        in_chart = true;
        if (m.series.empty() || ms.own_label == m.series) follow.push_back(&ms);
      }
      if (!in_chart) continue;  // a merged run with no points in this chart
      if (follow.empty()) {
        chart.notes.push_back(
            fmt::format("{}: no measured series '{}' in this chart; not drawn.", label, m.series));
        continue;
      }
      // The x values of the series it follows (every x of the run's, for ""), with the
      // records measured there; a projection's own x values instead, where given.
      std::map<double, std::vector<const Record*>> at;
      for (const Measured* ms : follow)
        for (const auto& [x, rec] : ms->at_x) at[x].push_back(rec);
      if (!m.xs.empty()) {
        std::map<double, std::vector<const Record*>> own;
        for (double x : m.xs) own[x] = at.count(x) ? at[x] : std::vector<const Record*>{};
        at = std::move(own);
      }
      // The experiment's valid records in this run, for models that fit across the figure.
      std::vector<const Record*> run_records;
      std::string experiment;
      for (const Measured* ms : follow)
        if (!ms->at_x.empty()) experiment = ms->at_x.begin()->second->experiment;
      for (const Record& r : runs[ri].records)
        if (r.experiment == experiment && r.valid && r.stats.n > 0) run_records.push_back(&r);
      if (m.note) {
        try {
          if (std::string line = m.note(ModelPoint{0, {}, &runs[ri].calibration, run_records});
              !line.empty())
            chart.notes.push_back(label + ": " + line);
        } catch (const std::exception& ex) {
          chart.notes.push_back(fmt::format("{}: its note failed: {}", label, ex.what()));
        }
      }

      ChartSeries s;
      s.label = label;
      s.is_model = true;
      s.experiment_model = true;
      if (!m.series.empty()) s.owner = follow.front()->series.label;
      std::vector<std::string> missing;
      bool gap = false;
      for (const auto& [x, recs] : at) {
        std::optional<double> y;
        try {
          if (m.y) y = m.y(ModelPoint{x, recs, &runs[ri].calibration, run_records});
        } catch (const std::exception& ex) {  // one bad model spoils no chart
          chart.notes.push_back(fmt::format("{} failed at x = {}: {}", label, x, ex.what()));
        }
        if (!y || !std::isfinite(*y)) {
          missing.push_back(fmt::format("{}", x));
          gap = !s.points.empty();
          continue;
        }
        s.points.push_back({x, *y, *y, *y, "", gap});
        gap = false;
      }
      if (s.points.empty()) {
        chart.notes.push_back(label + ": no value at any x of this chart; not drawn.");
        continue;
      }
      if (!missing.empty())
        chart.notes.push_back(fmt::format("{}: no value at x = {} (a gap in the curve).", label,
                                          fmt::join(missing, ", ")));
      chart.series.push_back(std::move(s));
    }
  }
}

}  // namespace concurdl::chart_detail
