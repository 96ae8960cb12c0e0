// Internal to the charts: how the four parts hand a chart to each other.
//   data.cpp     records -> measured series (selection by `where`, x and y, CI, labels)
//   models.cpp   what is drawn beside them (ideal, Amdahl and Gustafson fits, ceilings,
//                roofline, Karp–Flatt notes, the experiment's own Figure::models)
//   layout.cpp   how it looks (key placement, axes and log scales, tics, colours, dashes)
//   gnuplot.cpp  the files (STEM.dat, STEM.gp) and running gnuplot for STEM.svg / STEM.png
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/harness/report.hpp"

namespace concurdl::chart_detail {

// ---- data.cpp ----

// A measured series with what the models need to know about it.
struct Measured {
  ChartSeries series;
  std::size_t run = 0;    // index into the runs, for its core count and calibration
  std::string own_label;  // the label without the run prefix or a repeat suffix
  std::multimap<double, const Record*> at_x;  // the records behind each point
};

// A chart whose measured series are built, waiting for its models.
struct ChartData {
  ChartSpec chart;
  std::string y;  // what y charts: "median", a Metric's name or a derived metric
  // The experiment's worker-count axis ("threads", "ranks", ...). Only when x is that axis do
  // the ideal line S = p, the Amdahl and Gustafson fits and the cut at the run's cores apply.
  std::string scaling_axis;
  bool x_is_workers = false;
  bool categorical = false;             // x drawn as categories (bars, non-numeric x)
  std::vector<std::string> categories;  // their names, in axis order
  std::vector<Measured> measured;
  double xmin = 0, xmax = 0;  // over every measured point
};

// The measured part of one figure, or nullopt when no record falls in it.
std::optional<ChartData> measure(const std::vector<RunFile>& runs,
                                 const std::vector<std::string>& labels, const Experiment& e,
                                 const Figure& fig);

// The run's core count from its provenance, if it recorded one.
std::optional<int> run_cores(const RunFile& run);

// ---- models.cpp ----

// The harness's overlays (Figure::overlays, or the speedup default) and their notes.
void add_overlays(ChartData& d, const std::vector<RunFile>& runs,
                  const std::vector<std::string>& labels, const Figure& fig);
// The experiment's analytical models (Figure::models), one curve per model and run.
void add_models(ChartData& d, const std::vector<RunFile>& runs,
                const std::vector<std::string>& labels, const Figure& fig);

// ---- layout.cpp ----

// gnuplot settings for the key, the axes and the colours, given the drawn (non-empty) series.
std::string layout_settings(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn);
// One `plot` clause per drawn series (index i of `dat`), with its colour, dashes and points.
std::vector<std::string> plot_clauses(const ChartSpec& chart,
                                      const std::vector<const ChartSeries*>& drawn,
                                      const std::string& dat);

// The key entry of the points above their calibrated ceiling.
inline constexpr std::string_view kAboveCeilingLabel = "above the calibrated ceiling (see notes)";
// Those points as drawn (a bar's x moved onto its bar, y at its top), in the order of `drawn`:
// the block after the series in the .dat (index drawn.size()), circled in red. Empty when none.
std::vector<ChartPoint> above_ceiling_marks(const ChartSpec& chart,
                                            const std::vector<const ChartSeries*>& drawn);

// ---- gnuplot.cpp ----

// A gnuplot double-quoted string (labels are drawn `noenhanced`).
// A gnuplot double-quoted string; a line break in `s` is dropped (a space), or with line_breaks
// kept as gnuplot's "\n" (a title on two lines).
std::string gp_string(std::string_view s, bool line_breaks = false);
// A number as the .dat and .gp write it: up to 10 significant digits.
std::string num(double v);

}  // namespace concurdl::chart_detail
