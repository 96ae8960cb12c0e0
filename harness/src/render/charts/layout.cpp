// Charts, the layout: where the key goes, how the axes are scaled and ticked, and how each
// series is told apart (colours, point shapes, dashes for models). Everything here is a gnuplot
// setting written into STEM.gp, so a reader can restyle it there.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "charts_detail.hpp"

namespace concurdl::chart_detail {

namespace {

// gnuplot's default line types repeat their colours after 8, and a ladder of ten variants is
// common here: twelve distinct colours (matplotlib's tab10 plus two), and past twelve series a
// different point shape for each round of colours.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                    "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                    "#bcbd22", "#17becf", "#000080", "#808000"};
constexpr int kColours = static_cast<int>(std::size(kPalette));
// An experiment's model that follows no one series: dark colours, apart from the measured ones.
constexpr const char* kModelPalette[] = {"#303030", "#6a3d9a", "#b15928", "#1b7837"};

int point_type(int colour) {
  static constexpr int kShapes[] = {7, 5, 9, 11, 13};  // filled circle, square, triangles, diamond
  return kShapes[((colour - 1) / kColours) % 5];
}

std::vector<const ChartSeries*> measured_of(const std::vector<const ChartSeries*>& drawn) {
  std::vector<const ChartSeries*> measured;
  for (const auto* s : drawn)
    if (!s->is_model) measured.push_back(s);
  return measured;
}

// The measured series whose colour a model takes: its `owner`, or for a harness overlay without
// one, the series its label names: "Amdahl fit (NAME): ..." belongs to NAME.
int owner_of(const ChartSeries& m, const std::vector<const ChartSeries*>& measured) {
  if (!m.owner.empty()) {
    for (std::size_t i = 0; i < measured.size(); ++i)
      if (measured[i]->label == m.owner) return static_cast<int>(i);
  }
  if (m.experiment_model) return -1;
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

// Bars of one category stand side by side, 0.8 wide together: the k-th of n (from 0) is moved
// this far from the category's x.
double bar_width(std::size_t n) { return 0.8 / std::max(1.0, static_cast<double>(n)); }
double bar_offset(std::size_t k, std::size_t n) {
  return (static_cast<double>(k) - (static_cast<double>(n) - 1) / 2.0) * bar_width(n);
}

bool has_error_bars(const ChartSeries& s) {
  return std::any_of(s.points.begin(), s.points.end(),
                     [](const ChartPoint& p) { return p.lo != p.y || p.hi != p.y; });
}

// Where an inside key fits: the first corner of the plot (in the order that suits the chart)
// whose box, estimated from the label lengths at 800x500 and 11 pt, covers nothing drawn.
// Positions are estimated in graph fractions with gnuplot's autoscaling approximated (whole
// decades or powers of two on log axes, zero at the bottom of linear ones).
std::optional<std::string> free_corner(const ChartSpec& chart,
                                       const std::vector<const ChartSeries*>& drawn,
                                       double log_x_base, std::size_t longest, std::size_t entries,
                                       double font_scale) {
  if (is_bar_kind(chart.kind)) return std::nullopt;  // bars fill the bottom, tops vary
  const double w = font_scale * ((static_cast<double>(longest) + 10) * 7 + 10) / 690;
  const double h = font_scale * (static_cast<double>(entries) * 17 + 12) / 400;
  if (w > 0.6 || h > 0.6) return std::nullopt;

  auto off_axis = [&](const ChartPoint& p) {
    return (chart.log_x && p.x <= 0) || (chart.log_y && p.lo <= 0);
  };
  double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  bool first = true;
  for (const auto* s : drawn)
    for (const auto& p : s->points) {
      if (off_axis(p)) continue;
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
        if (off_axis(p)) continue;
        // The point with its error bar, and the line to the next point.
        for (int k = 0; k <= 8 && !covered; ++k)
          covered = inside(fx(p.x), fy(p.lo) + (fy(p.hi) - fy(p.lo)) * k / 8);
        if (i + 1 < s->points.size()) {
          const auto& q = s->points[i + 1];
          if (q.gap_before || (chart.log_x && q.x <= 0) || (chart.log_y && q.y <= 0)) continue;
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

// The key goes inside the plot, in the first corner where it covers no point, error bar or
// line; failing that, under the plot, pinned to the bottom edge (gnuplot's `set key below`
// draws over the x label), with a bottom margin for the rows it wraps into (~95 characters).
std::string key_settings(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn,
                         double log_x_base) {
  std::size_t longest = 0;
  for (const auto* s : drawn) longest = std::max(longest, s->label.size());
  std::size_t entries = drawn.size();
  if (!above_ceiling_marks(chart, drawn).empty()) {
    longest = std::max(longest, kAboveCeilingLabel.size());
    ++entries;
  }
  // A long key may still fit inside in smaller type (9 pt instead of 11).
  if (auto corner = free_corner(chart, drawn, log_x_base, longest, entries, 1.0))
    return "set key inside " + *corner + " box opaque noenhanced\n";
  if (auto small = free_corner(chart, drawn, log_x_base, longest, entries, 0.82))
    return "set key inside " + *small + " box opaque noenhanced font ',9' spacing 0.95\n";
  const std::size_t per_row = std::max<std::size_t>(1, 95 / (longest + 9));
  const std::size_t rows = (entries + per_row - 1) / per_row;
  return fmt::format(
             "set key at screen 0.5, screen 0.01 center bottom horizontal maxcols {} Left reverse "
             "noenhanced\n",
             per_row) +
         fmt::format("set bmargin {:.1f}\n", 3.5 + 1.05 * static_cast<double>(rows));
}

}  // namespace

std::string layout_settings(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn) {
  const auto measured = measured_of(drawn);
  // Categories (bars, or a non-numeric x): tics from the labels the points carry.
  std::map<double, std::string> categories;
  for (const auto* s : measured)
    for (const auto& p : s->points)
      if (!p.x_label.empty()) categories.emplace(p.x, p.x_label);

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

  const double log_x_base = xmax > 1024 ? 10 : 2;
  std::string g = key_settings(chart, drawn, log_x_base);
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
  if (categories.empty() && !chart.log_x && !measured_x.empty()) {
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
  if (is_bar_kind(chart.kind)) g += "set style fill solid 0.75 border -1\n";
  for (int i = 0; i < kColours; ++i)
    g += fmt::format("set linetype {} lc rgb '{}'\n", i + 1, kPalette[i]);
  g += fmt::format("set linetype cycle {}\n", kColours);
  return g;
}

std::vector<std::string> plot_clauses(const ChartSpec& chart,
                                      const std::vector<const ChartSeries*>& drawn,
                                      const std::string& dat) {
  const auto measured = measured_of(drawn);
  const bool bars = is_bar_kind(chart.kind);
  // Stacked: every series' box on the same x, full width, from its slice's bottom (lo, column
  // 3) to its top (y): data.cpp stacked them.
  const bool stacked = chart.kind == FigureKind::stacked;
  // Measured series take colours 1..n. A model fitted to or following one series takes that
  // series' colour, dashed (an experiment's models dashtype 2, then 4 and 5 for that series'
  // further ones); the experiment's other models dark colours, dashtype 2; the harness's other
  // overlays (ideal, ceilings) are grey, each with its own dash pattern.
  std::vector<std::string> clauses;
  const double width = stacked ? bar_width(1) : bar_width(measured.size());
  int measured_i = 0, grey_i = 0, model_i = 0;
  std::map<int, int> models_of_owner;  // a series' second and third model: other dashes
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const ChartSeries& s = *drawn[i];
    const std::string src = dat + " index " + std::to_string(i);
    const std::string title = " title " + gp_string(s.label);
    if (s.is_model) {
      const int owner = owner_of(s, measured);
      std::string style;
      if (s.experiment_model && owner >= 0) {
        static constexpr int kDashes[] = {2, 4, 5};
        style = fmt::format("lt {} dt {} lw 2", owner + 1, kDashes[models_of_owner[owner]++ % 3]);
      } else if (s.experiment_model) {
        style = fmt::format("lc rgb '{}' dt 2 lw 2",
                            kModelPalette[model_i++ % std::size(kModelPalette)]);
      } else {
        // Amdahl dashed, Gustafson dash-dotted, when both are fitted to one series.
        const int dash = s.label.rfind("Gustafson", 0) == 0 ? 4 : 2;
        style = owner >= 0 ? fmt::format("lt {} dt {} lw 1.5", owner + 1, dash)
                           : fmt::format("lc rgb '#404040' dt {} lw 1.5", 3 + (grey_i++ % 3));
      }
      // The experiment's models are evaluated at measured x values only: a small open marker
      // on each, so that a value standing alone between gaps still shows.
      clauses.push_back(
          src + " using 1:2 with " +
          (s.experiment_model ? "linespoints " + style + " pt 6 ps 0.7" : "lines " + style) +
          title);
      continue;
    }
    const int colour = ++measured_i;
    if (bars) {
      const double offset =
          stacked ? 0.0 : bar_offset(static_cast<std::size_t>(measured_i - 1), measured.size());
      const std::string x = fmt::format("($1{:+.4f})", offset);
      // Past the palette, the colours come round again: a fill pattern tells them apart.
      const std::string fill =
          colour > kColours ? fmt::format(" fs pattern {} border -1", (colour - 1) / kColours + 1)
                            : "";
      if (stacked) {
        clauses.push_back(src + " using " + x + ":(($2+$3)/2):(" + num(width / 2) +
                          "):(($2-$3)/2) with boxxyerror lt " + std::to_string(colour) +
                          (fill.empty() ? " fs solid 0.75 border -1" : fill) + title);
        continue;
      }
      clauses.push_back(src + " using " + x + ":2:(" + num(width) + ") with boxes lt " +
                        std::to_string(colour) + fill + title);
      if (has_error_bars(s))
        clauses.push_back(src + " using " + x +
                          ":2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle");
    } else if (has_error_bars(s)) {
      clauses.push_back(src +
                        fmt::format(" using 1:2:3:4 with yerrorlines lt {} lw 2 pt {} ps 0.8",
                                    colour, point_type(colour)) +
                        title);
    } else {
      clauses.push_back(src +
                        fmt::format(" using 1:2 with linespoints lt {} lw 2 pt {} ps 0.8", colour,
                                    point_type(colour)) +
                        title);
    }
  }
  // Drawn last, over everything: a large open red circle around each point above its ceiling.
  if (!above_ceiling_marks(chart, drawn).empty())
    clauses.push_back(dat + " index " + std::to_string(drawn.size()) +
                      " using 1:2 with points pt 6 ps 2.4 lw 2 lc rgb '#e00000' title " +
                      gp_string(kAboveCeilingLabel));
  return clauses;
}

std::vector<ChartPoint> above_ceiling_marks(const ChartSpec& chart,
                                            const std::vector<const ChartSeries*>& drawn) {
  const auto measured = measured_of(drawn);
  std::vector<ChartPoint> marks;
  for (std::size_t k = 0; k < measured.size(); ++k)
    for (ChartPoint p : measured[k]->points) {
      if (!p.above_ceiling) continue;
      if (chart.kind == FigureKind::bars) p.x += bar_offset(k, measured.size());  // not stacked
      marks.push_back(p);
    }
  return marks;
}

}  // namespace concurdl::chart_detail
