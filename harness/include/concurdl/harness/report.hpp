// Charts (gnuplot) and reports (Markdown + self-contained HTML) for one run or several merged.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

struct ChartPoint {
  double x = 0, y = 0;
  double lo = 0, hi = 0;    // error bar (95% CI); equal to y when there is none
  std::string x_label;      // category label for bar charts (e.g. the variant)
  bool gap_before = false;  // a model with no value between the previous point and this one
  // Its record is above its calibrated ceiling (Record::notes "above_ceiling") and y is the rate
  // or fraction compared with it: drawn circled, and the chart's notes say why it may be.
  bool above_ceiling = false;
};

struct ChartSeries {
  std::string label;
  std::vector<ChartPoint> points;
  bool is_model = false;  // an analytical overlay (drawn dashed, labelled as a model)
  // One of the experiment's Figure::models ("model: LABEL"), not a harness overlay (ideal line,
  // fits, ceilings): written to the .dat as a model block and drawn with `dashtype 2`.
  bool experiment_model = false;
  std::string owner;  // the measured series whose colour a model takes ("" = its own colour)
};

// One chart, ready to draw: measured series first, then model overlays (the harness's, then the
// experiment's Figure::models, one curve per model and run).
struct ChartSpec {
  std::string stem;  // file name stem: "ch01_sum_memory_bound_speedup"
  std::string title;
  std::string experiment;
  FigureKind kind = FigureKind::lines;
  std::string x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<ChartSeries> series;
  std::vector<std::string> notes;  // e.g. "Amdahl fit on p <= 2 (the cores): f = 0.031"
};

// Build the chart specs for every declared figure of every experiment present in `runs`.
// With several runs, each series label is prefixed by its run's host (one series per machine).
// Experiments not registered in this program are skipped (their tables still appear).
std::vector<ChartSpec> build_charts(const std::vector<RunFile>& runs);

struct ChartFiles {
  std::filesystem::path dat, gp, svg, png;  // svg/png empty when gnuplot is unavailable
};

// Write STEM.dat and STEM.gp into `dir` and run gnuplot on the .gp to make STEM.svg and
// STEM.png. Without gnuplot (or if it fails) the .dat and .gp are still written and `warning`
// says why there are no pictures.
ChartFiles render_chart(const ChartSpec& chart, const std::filesystem::path& dir,
                        std::string& warning);

// Run gnuplot on dir/STEM.gp (written beside its STEM.dat) for STEM.svg and STEM.png, as
// render_chart does: stale pictures removed first; `warning` says why there are none.
ChartFiles run_chart_script(const std::filesystem::path& dir, const std::string& stem,
                            std::string& warning);

struct ReportFiles {
  std::filesystem::path md, html;
  std::vector<ChartFiles> charts;
  std::vector<std::string> warnings;
};

// Charts into out_dir/figures/, then out_dir/report.md and out_dir/report.html (figures
// inlined as SVG, so the HTML is one self-contained file). `load_errors` ("file: what") are
// listed at the top of the report: a bad results file is named, the others still render.
ReportFiles write_report(const std::vector<RunFile>& runs,
                         const std::vector<std::string>& load_errors,
                         const std::filesystem::path& out_dir);

}  // namespace concurdl
