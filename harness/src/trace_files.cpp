// Timelines written down (trace_files.hpp): Chrome trace JSON and a gnuplot Gantt chart.
#include "concurdl/harness/trace_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "charts/charts_detail.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"

namespace concurdl::trace {

namespace {
using chart_detail::gp_string;
using nlohmann::json;
}  // namespace

void write_chrome_trace(const std::filesystem::path& path, const std::vector<Event>& events,
                        const std::map<std::string, std::string>& metadata, std::size_t dropped) {
  json trace_events = json::array();
  std::map<int, std::string> tracks;
  for (const Event& e : events) tracks[e.track_id] = e.track;
  for (const auto& [id, name] : tracks) {
    trace_events.push_back({{"ph", "M"},
                            {"name", "thread_name"},
                            {"pid", 1},
                            {"tid", id},
                            {"args", {{"name", name}}}});
    trace_events.push_back({{"ph", "M"},
                            {"name", "thread_sort_index"},
                            {"pid", 1},
                            {"tid", id},
                            {"args", {{"sort_index", id}}}});
  }
  for (const Event& e : events)
    trace_events.push_back({{"ph", "X"},
                            {"name", e.name},
                            {"cat", e.category},
                            {"pid", 1},
                            {"tid", e.track_id},
                            {"ts", e.begin_us},
                            {"dur", e.dur_us}});
  json other = json::object();
  for (const auto& [k, v] : metadata) other[k] = v;
  other["dropped_spans"] = dropped;
  const json doc = {{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  write_file_atomic(path, doc.dump(1) + "\n");
}

std::vector<Event> read_chrome_trace(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.string()));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not JSON ({})", path.string(), e.what()));
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw std::runtime_error(fmt::format("{}: no traceEvents array", path.string()));
  std::map<int, std::string> names;
  std::vector<Event> out;
  try {
    for (const json& e : doc["traceEvents"]) {
      const std::string ph = e.at("ph").get<std::string>();
      if (ph == "M" && e.at("name") == "thread_name")
        names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
      if (ph != "X") continue;
      Event ev;
      ev.name = e.at("name").get<std::string>();
      ev.category = e.value("cat", "");
      ev.track_id = e.at("tid").get<int>();
      ev.begin_us = e.at("ts").get<double>();
      ev.dur_us = e.at("dur").get<double>();
      out.push_back(std::move(ev));
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("{}: a malformed event ({})", path.string(), e.what()));
  }
  for (Event& e : out) {
    const auto it = names.find(e.track_id);
    e.track = it == names.end() ? fmt::format("thread {}", e.track_id) : it->second;
  }
  return out;
}

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

}  // namespace concurdl::trace
