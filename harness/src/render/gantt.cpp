// Timelines drawn (gantt.hpp): a gnuplot Gantt chart of a trace's spans, and the charts of a
// run's traces/ folder.
#include "concurdl/harness/gantt.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "charts/charts_detail.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/trace_files.hpp"

namespace concurdl::trace {

namespace {
using chart_detail::gp_string;
}  // namespace

void render_gantt(const std::vector<Event>& events, const std::filesystem::path& dir,
                  const std::string& stem, const std::string& title, std::string& warning,
                  int max_depth) {
  std::filesystem::create_directories(dir);
  std::vector<const Event*> drawn;
  for (const Event& e : events)
    if (e.depth <= max_depth) drawn.push_back(&e);
  std::vector<std::string> categories;
  std::map<int, std::string> tracks;
  for (const Event* e : drawn) {
    if (std::find(categories.begin(), categories.end(), e->category) == categories.end())
      categories.push_back(e->category);
    tracks[e->track_id] = e->track;
  }
  double t0 = 0, t1 = 0;
  if (!drawn.empty()) {
    t0 = drawn.front()->begin_us;
    for (const Event* e : drawn) {
      t0 = std::min(t0, e->begin_us);
      t1 = std::max(t1, e->begin_us + e->dur_us);
    }
  }
  // One block per category (gnuplot's `index`): begin and end in ms from the first span, the
  // track's row, the span's name.
  std::ostringstream dat;
  std::string flat = title;  // for comments: one line
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  dat << "# concurdl timeline: " << flat
      << "\n# columns: begin_ms end_ms row half_height name (outermost spans are the taller, "
         "paler boxes behind)\n";
  // A category is a background (a step, an epoch: drawn pale, taller, behind) when its spans
  // are all outermost on tracks that have spans inside them; the others are the work.
  std::set<int> nested_tracks;
  for (const Event* e : drawn)
    if (e->depth > 0) nested_tracks.insert(e->track_id);
  std::vector<bool> background(categories.size(), true);
  for (const Event* e : drawn) {
    const auto c = static_cast<std::size_t>(
        std::find(categories.begin(), categories.end(), e->category) - categories.begin());
    if (e->depth > 0 || !nested_tracks.count(e->track_id)) background[c] = false;
  }
  // Names inside the boxes wide enough to hold them (a 900-pixel chart: about 4% of the span).
  const double min_label_ms = (t1 - t0) / 1000.0 * 0.04;
  for (std::size_t c = 0; c < categories.size(); ++c) {
    dat << "# category " << categories[c] << "\n";
    for (const Event* e : drawn)
      if (e->category == categories[c]) {
        const bool label = !background[c] && e->dur_us / 1000.0 >= min_label_ms;
        dat << fmt::format("{:.6f} {:.6f} {} {} {}\n", (e->begin_us - t0) / 1000.0,
                           (e->begin_us + e->dur_us - t0) / 1000.0, e->track_id,
                           background[c] ? 0.42 : 0.3, gp_string(label ? e->name : ""));
      }
    dat << "\n\n";
  }
  write_file_atomic(dir / (stem + ".dat"), dat.str());
  if (drawn.empty()) {
    write_file_atomic(dir / (stem + ".gp"), "# concurdl timeline: " + flat + "\n# No spans.\n");
    warning = stem + ": no spans, no picture";
    return;
  }
  const int rows = tracks.empty() ? 1 : tracks.rbegin()->first + 1;
  const int height = std::max(280, 110 + 45 * rows);
  std::string g;
  g += "# concurdl timeline (Gantt chart): " + flat + "\n";
  g += "# Re-run in this directory: gnuplot " + stem + ".gp (reads " + stem + ".dat)\n";
  g += "set encoding utf8\n";
  g += fmt::format("set terminal svg size 900,{} dynamic enhanced font 'sans,11'\n", height);
  g += "set output '" + stem + ".svg'\n";
  g += "set title " + gp_string(title, true) + " noenhanced\n";
  g += "set xlabel 'time (ms)'\nset grid xtics\nunset ytics\n";
  std::string tics;
  for (const auto& [id, name] : tracks)
    tics += fmt::format("{}{} {}", tics.empty() ? "" : ", ", gp_string(name), id);
  g += "set ytics (" + tics + ") noenhanced\n";
  g += fmt::format("set yrange [{}:-0.5]\n", rows - 0.5);
  g += fmt::format("set xrange [0:{:.6f}]\n", (t1 - t0) / 1000.0 * 1.02);
  g += "set key outside bottom center horizontal noenhanced\nset style fill solid 0.85 border lc "
       "rgb '#333333'\n";
  static const char* const palette[] = {"#4C72B0", "#DD8452", "#55A868", "#C44E52",
                                        "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"};
  std::vector<std::string> clauses;
  for (std::size_t c = 0, colour = 0; c < categories.size(); ++c) {
    clauses.push_back(fmt::format(
        "'{}.dat' index {} using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '{}' "
        "title {}",
        stem, c, background[c] ? "#DDDDDD" : palette[colour++ % 8],
        gp_string(background[c] ? categories[c] + " (the gaps: waiting)" : categories[c])));
  }
  // Names inside the boxes while they can be read.
  if (drawn.size() <= 2000)
    for (std::size_t c = 0; c < categories.size(); ++c)
      clauses.push_back(fmt::format(
          "'{}.dat' index {} using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' "
          "notitle",
          stem, c));
  g += "plot " + fmt::format("{}", fmt::join(clauses, ", \\\n     ")) + "\n";
  g += fmt::format("set terminal pngcairo size 900,{} enhanced font 'sans,11'\n", height);
  g += "set output '" + stem + ".png'\nreplot\nunset output\n";
  write_file_atomic(dir / (stem + ".gp"), g);
  run_chart_script(dir, stem, warning);
}

int render_trace_dir(const std::filesystem::path& dir, std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return 0;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  int drawn = 0;
  for (const std::filesystem::path& f : files) {
    std::map<std::string, std::string> meta;
    std::vector<Event> events;
    try {
      events = read_chrome_trace(f, &meta);
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
      continue;
    }
    const auto title = meta.find("title");
    std::string warning;
    // One step after the first (which starts the trial's threads) when there are several.
    render_gantt(first_spans(events, 1, 1), f.parent_path(), f.stem().string(),
                 title != meta.end() ? title->second : f.stem().string(), warning, 1);
    if (!warning.empty()) warnings.push_back(warning);
    ++drawn;
  }
  return drawn;
}

}  // namespace concurdl::trace
