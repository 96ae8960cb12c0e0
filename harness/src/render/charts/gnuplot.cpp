// Charts, the files: every chart leaves STEM.dat and a standalone STEM.gp beside its STEM.svg /
// STEM.png, so anyone can restyle it with `gnuplot STEM.gp` in the figures directory. Without
// gnuplot (or when it fails) the .dat and .gp are still written and the warning says why.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "charts_detail.hpp"
#include "concurdl/build_info.hpp"

namespace concurdl {

namespace chart_detail {

// Labels are drawn `noenhanced`, so underscores and carets stay literal; backslashes and quotes
// are escaped and line breaks dropped.
std::string gp_string(std::string_view s, bool line_breaks) {
  std::string out = "\"";
  for (char c : s) {
    if (line_breaks && c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

std::string num(double v) { return fmt::format("{:.10g}", v); }

}  // namespace chart_detail

namespace {

using chart_detail::gp_string;
using chart_detail::num;

std::string dat_label(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  std::replace(s.begin(), s.end(), '\n', ' ');
  s.insert(s.begin(), '"');
  s.push_back('"');
  return s;
}

// One block per series, measured first. A model's block says so and has only x and the model's
// y: it is a curve, never a measurement with an interval.
std::string write_dat(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn) {
  const bool bars = is_bar_kind(chart.kind);
  std::string out;
  out += "# concurdl chart data: " + chart.title + "\n";
  out += "# experiment " + chart.experiment + ", drawn by " + chart.stem + ".gp\n";
  out += "# x: " + chart.x_label + "; y: " + chart.y_label + "\n";
  out += bars ? "# measured columns: x (category index) y lo hi x_label\n"
              : "# measured columns: x y lo hi\n";
  out += "# lo/hi: the 95% confidence interval (equal to y where there is none)\n";
  out += "# model columns: x model_y (a blank line where the model has no value)\n";
  out += "# one block per series, separated by two blank lines (gnuplot: index 0, 1, ...)\n";
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const ChartSeries& s = *drawn[i];
    const char* kind = !s.is_model          ? "measured"
                       : s.experiment_model ? "model (the experiment's, not a measurement)"
                                            : "model";
    // Two blank lines end a block: gnuplot's `index N` selects series N.
    out += fmt::format("{}# index {}\n# series: {}\n# kind: {}\n", i == 0 ? "" : "\n\n", i, s.label,
                       kind);
    if (s.is_model) out += "# columns: x model_y\n";
    for (const auto& p : s.points) {
      if (p.gap_before) out += "\n";  // one blank line: gnuplot lifts the pen
      if (s.is_model) {
        out += num(p.x) + " " + num(p.y) + "\n";
        continue;
      }
      out += num(p.x) + " " + num(p.y) + " " + num(p.lo) + " " + num(p.hi);
      if (bars) out.append(" ").append(dat_label(p.x_label.empty() ? num(p.x) : p.x_label));
      out += "\n";
    }
  }
  // Last, the points above their calibrated ceiling again, where they are drawn: circled.
  if (const auto marks = chart_detail::above_ceiling_marks(chart, drawn); !marks.empty()) {
    out += fmt::format("{}# index {}\n# series: {}\n", drawn.empty() ? "" : "\n\n", drawn.size(),
                       chart_detail::kAboveCeilingLabel);
    out += "# kind: marker (measured points above their calibrated ceiling; see the notes)\n";
    out += bars ? "# columns: x (moved onto its bar) y\n" : "# columns: x y\n";
    for (const auto& p : marks) out += num(p.x) + " " + num(p.y) + "\n";
  }
  return out;
}

std::string write_gp(const ChartSpec& chart, const std::vector<const ChartSeries*>& drawn) {
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
  g += chart_detail::layout_settings(chart, drawn);
  const auto clauses = chart_detail::plot_clauses(chart, drawn, "'" + chart.stem + ".dat'");
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

}  // namespace

ChartFiles render_chart(const ChartSpec& chart, const std::filesystem::path& dir,
                        std::string& warning) {
  warning.clear();
  std::filesystem::create_directories(dir);
  ChartFiles files;
  files.dat = dir / (chart.stem + ".dat");
  files.gp = dir / (chart.stem + ".gp");

  // Empty series would be empty blocks, which gnuplot's `index` cannot address.
  std::vector<const ChartSeries*> drawn;
  for (const auto& s : chart.series)
    if (!s.points.empty()) drawn.push_back(&s);
  write_text(files.dat, write_dat(chart, drawn));
  const bool any_measured =
      std::any_of(drawn.begin(), drawn.end(), [](const ChartSeries* s) { return !s->is_model; });
  if (!any_measured) {
    write_text(files.gp,
               "# concurdl chart: " + chart.title + "\n# No measured points: nothing to plot.\n");
    warning = chart.stem + ": no measured points, no picture";
    return files;
  }
  write_text(files.gp, write_gp(chart, drawn));
  return run_chart_script(dir, chart.stem, warning);
}

ChartFiles run_chart_script(const std::filesystem::path& dir, const std::string& stem,
                            std::string& warning) {
  warning.clear();
  ChartFiles files;
  files.dat = dir / (stem + ".dat");
  files.gp = dir / (stem + ".gp");
  const auto svg = dir / (stem + ".svg");
  const auto png = dir / (stem + ".png");
  const auto log = dir / (stem + ".log");

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
    warning = "could not run gnuplot for " + stem + ": " + res.error;
    return files;
  }
  if (res.status == 127) {
    warning = "could not execute " + *exe + " for " + stem;
    return files;
  }
  if (res.status != 0) {
    warning = fmt::format("gnuplot failed on {}.gp (exit {}): {} (see {}.log)", stem, res.status,
                          last_line_of(log), stem);
    return files;
  }
  if (non_empty_file(svg)) files.svg = svg;
  if (non_empty_file(png)) files.png = png;
  if (files.svg.empty() || files.png.empty()) {
    warning = fmt::format("gnuplot ran on {}.gp but left no {} (see {}.log)", stem,
                          files.svg.empty() ? "SVG" : "PNG", stem);
    return files;
  }
  std::filesystem::remove(log, ec);
  return files;
}

}  // namespace concurdl
