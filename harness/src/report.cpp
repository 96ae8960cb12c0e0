// The report of one run, or of several merged: runs and their provenance, calibration, then per
// chapter and experiment its charts, their notes (fits, Karp–Flatt) and a table of every record.
// Written twice: report.md (figures linked) and report.html (one file, SVG figures inlined).
#include "concurdl/harness/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "concurdl/build_info.hpp"
#include "report_detail.hpp"

namespace concurdl {

// Shared with charts.cpp (internal, so not in report.hpp).


namespace {

using report_detail::provenance_text;

// ---- numbers ----

// Units an SI prefix may go in front of; others ("ns", "%", "GB/s") are printed as they are.
bool prefixable(const std::string& unit) {
  static const std::set<std::string> units = {"",        "s",      "B",       "B/s",   "bytes",
                                              "bytes/s", "FLOP/s", "items/s", "ops/s", "op/s",
                                              "/s",      "Hz",     "items"};
  return units.count(unit) > 0;
}

// 3 significant digits with an SI prefix: 0.0100 s -> "10.0 ms", 6.7e9 B/s -> "6.70 GB/s".
std::string si(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "?";
  const std::string sep = unit.empty() ? "" : " ";
  if (!prefixable(unit)) return fmt::format("{:.4g}{}{}", v, sep, unit);
  if (v == 0) return "0" + sep + unit;
  static const char* prefixes[] = {"p", "n", "µ", "m", "", "k", "M", "G", "T", "P", "E"};
  int e = static_cast<int>(std::floor(std::log10(std::abs(v)) / 3));
  // Seconds stay seconds above 1 (a "ks" reads badly); plain numbers below 1 stay plain.
  e = std::clamp(e, unit.empty() ? 0 : -4, unit == "s" ? 0 : 6);
  const double m = v / std::pow(1000.0, e);
  const int decimals = std::abs(m) >= 100 ? 0 : std::abs(m) >= 10 ? 1 : 2;
  const std::string prefix = prefixes[e + 4];
  if (unit.empty() && prefix.empty()) return fmt::format("{:.4g}", v);
  return fmt::format("{:.{}f} {}{}", m, decimals, prefix, unit);
}

std::string pct(double v) { return fmt::format("{:.3g}%", 100 * v); }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// ---- the report's content, independent of the output format ----

struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // right-aligned columns
};

struct ChartEntry {
  const ChartSpec* spec;
  const ChartFiles* files;
  std::string why_no_picture;
};

struct ExperimentSection {
  std::string id, title;
  std::vector<ChartEntry> charts;
  std::vector<std::string> notes;
  Table records;
};

struct ChapterSection {
  std::string heading;
  std::vector<ExperimentSection> experiments;
};

std::string value_or_unknown(const nlohmann::json& prov, const std::string& key) {
  const std::string v = provenance_text(prov, key);
  return v.empty() ? "?" : v;
}

// `out_dir` names a single run whose path was never set (a report written right after the run).
Table runs_table(const std::vector<RunFile>& runs, const std::filesystem::path& out_dir) {
  Table t;
  t.head = {"run", "host", "CPU", "cores", "compiler", "build", "commit", "started"};
  t.numeric = {false, false, false, true, false, false, false, false};
  for (const auto& run : runs) {
    const auto& p = run.provenance;
    std::string commit = provenance_text(p, "git_commit");
    commit = commit.empty() ? "?" : commit.substr(0, 7);
    if (p.is_object() && p.contains("git_dirty") && p.at("git_dirty") == true) commit += " (dirty)";
    std::string dir = report_detail::run_dir_name(run);
    if (dir.empty() && runs.size() == 1) {
      auto p = std::filesystem::absolute(out_dir).lexically_normal();
      if (!p.has_filename()) p = p.parent_path();
      dir = p.filename().string();
    }
    t.rows.push_back({dir.empty() ? "?" : dir, value_or_unknown(p, "host"),
                      value_or_unknown(p, "cpu_model"), value_or_unknown(p, "cores"),
                      value_or_unknown(p, "compiler"), value_or_unknown(p, "build_type"), commit,
                      value_or_unknown(p, "started")});
  }
  return t;
}

Table calibration_table(const std::vector<RunFile>& runs, const std::vector<std::string>& labels) {
  Table t;
  t.head = {"run", "memory bandwidth (GB/s)", "peak GFLOP/s, 1 core", "peak GFLOP/s, all cores",
            "thread-to-thread copy (GB/s)"};
  t.numeric = {false, true, true, true, true};
  auto giga = [](double v) { return v > 0 ? fmt::format("{:.3g}", v / 1e9) : std::string("—"); };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Calibration& c = runs[i].calibration;
    if (c.empty() && c.thread_copy_bytes_per_s == 0 && c.peak_flops_1core == 0) continue;
    t.rows.push_back({labels[i], giga(c.mem_bandwidth_bytes_per_s), giga(c.peak_flops_1core),
                      giga(c.peak_flops), giga(c.thread_copy_bytes_per_s)});
  }
  return t;
}

// The derived metrics shown in record tables, in this order, and how each is printed.
struct DerivedColumn {
  const char* name;
  const char* head;
  std::string (*format)(double);
};
const DerivedColumn kDerived[] = {
    {"speedup", "speedup", [](double v) { return fmt::format("{:.3g}×", v); }},
    {"efficiency", "efficiency", [](double v) { return pct(v); }},
    {"items_per_s", "items/s", [](double v) { return si(v, "items/s"); }},
    {"bytes_per_s", "bytes/s", [](double v) { return si(v, "B/s"); }},
    {"flops_per_s", "FLOP/s", [](double v) { return si(v, "FLOP/s"); }},
    {"fraction_of_ceiling", "of ceiling", [](double v) { return pct(v); }},
};

Table records_table(const std::vector<RunFile>& runs, const std::vector<std::string>& labels,
                    const std::string& experiment) {
  std::vector<std::pair<std::size_t, const Record*>> recs;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& r : runs[i].records)
      if (r.experiment == experiment) recs.emplace_back(i, &r);

  std::set<std::string> present;
  for (const auto& [ri, r] : recs)
    for (const auto& [k, v] : r->derived) present.insert(k);
  std::vector<const DerivedColumn*> known;
  for (const auto& d : kDerived)
    if (present.count(d.name)) known.push_back(&d);
  std::vector<std::string> other;  // derived metrics this report has no format for
  for (const auto& k : present)
    if (std::none_of(std::begin(kDerived), std::end(kDerived),
                     [&](const DerivedColumn& d) { return k == d.name; }))
      other.push_back(k);

  Table t;
  const bool several = runs.size() > 1;
  if (several) {
    t.head.push_back("run");
    t.numeric.push_back(false);
  }
  for (const char* h : {"parameters", "median", "95% CI", "n"}) t.head.push_back(h);
  for (bool b : {false, true, true, true}) t.numeric.push_back(b);
  for (const auto* d : known) {
    t.head.push_back(d->head);
    t.numeric.push_back(true);
  }
  for (const auto& k : other) {
    t.head.push_back(k);
    t.numeric.push_back(true);
  }
  t.head.push_back("valid");
  t.numeric.push_back(false);

  for (const auto& [ri, r] : recs) {
    std::vector<std::string> row;
    if (several) row.push_back(labels[ri]);
    row.push_back(describe(r->params));
    const Summary& s = r->stats;
    const std::size_t n = s.n ? s.n : r->samples.size();
    row.push_back(n ? si(s.median, r->unit) : "—");
    row.push_back(n && (s.ci95_lo != 0 || s.ci95_hi != 0)
                      ? "[" + si(s.ci95_lo, r->unit) + ", " + si(s.ci95_hi, r->unit) + "]"
                      : "—");
    row.push_back(std::to_string(n));
    for (const auto* d : known) {
      auto it = r->derived.find(d->name);
      row.push_back(it == r->derived.end() ? "—" : d->format(it->second));
    }
    for (const auto& k : other) {
      auto it = r->derived.find(k);
      row.push_back(it == r->derived.end() ? "—" : fmt::format("{:.4g}", it->second));
    }
    std::string status =
        r->valid ? "ok" : "INVALID: " + (r->validation.empty() ? "no reason given" : r->validation);
    for (const auto& [k, v] : r->notes) status += fmt::format("; {}: {}", k, v);
    row.push_back(std::move(status));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string chapter_heading(const std::string& folder) {
  const ChapterInfo* c = nullptr;
  try {
    c = find_chapter(folder);
  } catch (const std::exception&) {  // a malformed folder name is no reason to lose a report
  }
  if (c && !c->title.empty() && c->folder == folder) return folder + " — " + c->title;
  return folder;
}

std::vector<ChapterSection> sections(const std::vector<RunFile>& runs,
                                     const std::vector<std::string>& labels,
                                     const std::vector<ChartSpec>& charts,
                                     const std::vector<ChartFiles>& files,
                                     const std::vector<std::string>& chart_warnings) {
  // Chapters in folder order; experiments in the order the runs measured them.
  std::map<std::string, std::vector<std::string>> by_chapter;
  for (const auto& run : runs)
    for (const auto& r : run.records) {
      std::string chapter = r.chapter;
      if (chapter.empty())
        if (const Experiment* e = find_experiment(r.experiment)) chapter = e->chapter;
      if (chapter.empty()) chapter = "(no chapter)";
      auto& ids = by_chapter[chapter];
      if (std::find(ids.begin(), ids.end(), r.experiment) == ids.end()) ids.push_back(r.experiment);
    }
  std::vector<ChapterSection> out;
  for (const auto& [chapter, ids] : by_chapter) {
    ChapterSection cs{chapter_heading(chapter), {}};
    for (const auto& id : ids) {
      ExperimentSection es;
      es.id = id;
      const Experiment* e = find_experiment(id);
      es.title = e && !e->title.empty() ? e->title : id;
      if (!e)
        es.notes.push_back(
            "This experiment is not registered in this program, so its figures "
            "are unknown: only its records are shown.");
      for (std::size_t i = 0; i < charts.size(); ++i)
        if (charts[i].experiment == id)
          es.charts.push_back({&charts[i], &files[i], chart_warnings[i]});
      es.records = records_table(runs, labels, id);
      cs.experiments.push_back(std::move(es));
    }
    out.push_back(std::move(cs));
  }
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- Markdown ----

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string md_table(const Table& t, int code_column = -1) {
  std::string out = "|";
  for (const auto& h : t.head) out += " " + md_cell(h) + " |";
  out += "\n|";
  for (std::size_t i = 0; i < t.head.size(); ++i) out += t.numeric[i] ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool code = static_cast<int>(i) == code_column && !row[i].empty();
      out += " " + (code ? "`" + md_cell(row[i]) + "`" : md_cell(row[i])) + " |";
    }
    out += "\n";
  }
  return out;
}

std::string md_alt(std::string s) {
  std::replace(s.begin(), s.end(), '[', '(');
  std::replace(s.begin(), s.end(), ']', ')');
  return s;
}

std::string markdown(const std::string& title, const std::string& subtitle,
                     const std::vector<std::string>& load_errors,
                     const std::vector<std::string>& warnings, const Table& runs,
                     const Table& calibration, const std::vector<ChapterSection>& chapters,
                     bool several) {
  std::string md = "# " + title + "\n\n" + subtitle + "\n\n";
  if (!load_errors.empty()) {
    md += "## Files that could not be loaded\n\n";
    for (const auto& e : load_errors) md += "- `" + e + "`\n";
    md += "\n";
  }
  if (!warnings.empty()) {
    md += "## Warnings\n\n";
    for (const auto& w : warnings) md += "- " + w + "\n";
    md += "\n";
  }
  md += "## Runs\n\n" + md_table(runs) + "\n";
  if (!calibration.rows.empty()) md += "## Calibration\n\n" + md_table(calibration) + "\n";
  for (const auto& ch : chapters) {
    md += "## " + ch.heading + "\n\n";
    for (const auto& e : ch.experiments) {
      md += "### " + e.title + " (`" + e.id + "`)\n\n";
      for (const auto& n : e.notes) md += "*" + n + "*\n\n";
      for (const auto& c : e.charts) {
        const std::string stem = c.spec->stem;
        if (!c.files->svg.empty())
          md += "![" + md_alt(c.spec->title) + "](figures/" + stem + ".svg)\n\n";
        else
          md += "**" + c.spec->title + "**: no picture (" +
                (c.why_no_picture.empty() ? "gnuplot produced none" : c.why_no_picture) + ").\n\n";
        md += "Data [" + stem + ".dat](figures/" + stem + ".dat), gnuplot script [" + stem +
              ".gp](figures/" + stem + ".gp)";
        if (!c.files->png.empty()) md += ", [PNG](figures/" + stem + ".png)";
        md += "\n\n";
        for (const auto& n : c.spec->notes) md += "- " + n + "\n";
        if (!c.spec->notes.empty()) md += "\n";
      }
      md += md_table(e.records, several ? 1 : 0) + "\n";
    }
  }
  return md;
}

// ---- HTML ----

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

// gnuplot's SVG, made fit to sit inside HTML: no XML prolog or DOCTYPE, its ids prefixed with
// the chart's stem (every gnuplot SVG defines "gpPt0", "gnuplot_canvas", ...), and its title.
std::string inline_svg(std::string svg, const ChartSpec& chart) {
  for (const char* open : {"<?xml", "<!DOCTYPE"}) {
    const auto start = svg.find(open);
    if (start == std::string::npos) continue;
    const auto end = svg.find('>', start);
    if (end == std::string::npos) continue;
    svg.erase(start, end + 1 - start);
  }
  const auto start = svg.find("<svg");
  if (start != std::string::npos) svg.erase(0, start);
  const std::string p = chart.stem + "_";
  for (const char* q : {"'", "\""}) {
    svg = replace_all(svg, std::string("id=") + q, std::string("id=") + q + p);
    svg = replace_all(svg, std::string("href=") + q + "#", std::string("href=") + q + "#" + p);
  }
  svg = replace_all(svg, "url(#", "url(#" + p);
  svg = replace_all(svg, "<title>Gnuplot</title>", "<title>" + esc(chart.title) + "</title>");
  return svg;
}

std::string html_table(const Table& t, int code_column = -1) {
  std::string out = "<table>\n<thead><tr>";
  for (std::size_t i = 0; i < t.head.size(); ++i)
    out += std::string(t.numeric[i] ? "<th class=\"num\">" : "<th>") + esc(t.head[i]) + "</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      std::string cls = t.numeric[i] ? "num" : "";
      if (row[i].rfind("INVALID", 0) == 0) cls = "invalid";
      out += cls.empty() ? "<td>" : "<td class=\"" + cls + "\">";
      out += static_cast<int>(i) == code_column ? "<code>" + esc(row[i]) + "</code>" : esc(row[i]);
      out += "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

constexpr const char* kCss = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; line-height: 1.45;
       max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.7em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
h3 code, td code { font-size: .9em; }
table { border-collapse: collapse; margin: .8em 0 1.5em; font-size: .9em; }
th, td { border: 1px solid #d0d0d0; padding: .25em .6em; vertical-align: top; }
th { background: #f3f3f3; text-align: left; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
td.invalid { color: #b00020; font-weight: 600; }
figure { margin: 1em 0; max-width: 820px; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { font-size: .85em; color: #555; }
ul.notes { font-size: .9em; color: #333; }
.box { border-left: 4px solid #b00020; background: #fff4f4; padding: .4em 1em; margin: 1em 0; }
.box.warn { border-color: #c77700; background: #fff9ec; }
.muted { color: #666; }
)css";

std::string html(const std::string& title, const std::string& subtitle,
                 const std::vector<std::string>& load_errors,
                 const std::vector<std::string>& warnings, const Table& runs,
                 const Table& calibration, const std::vector<ChapterSection>& chapters,
                 bool several) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + esc(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n";
  h += "<h1>" + esc(title) + "</h1>\n<p class=\"muted\">" + esc(subtitle) + "</p>\n";
  if (!load_errors.empty()) {
    h += "<div class=\"box\">\n<h2>Files that could not be loaded</h2>\n<ul>\n";
    for (const auto& e : load_errors) h += "<li><code>" + esc(e) + "</code></li>\n";
    h += "</ul>\n</div>\n";
  }
  if (!warnings.empty()) {
    h += "<div class=\"box warn\">\n<h2>Warnings</h2>\n<ul>\n";
    for (const auto& w : warnings) h += "<li>" + esc(w) + "</li>\n";
    h += "</ul>\n</div>\n";
  }
  h += "<h2>Runs</h2>\n" + html_table(runs);
  if (!calibration.rows.empty()) h += "<h2>Calibration</h2>\n" + html_table(calibration);
  for (const auto& ch : chapters) {
    h += "<h2>" + esc(ch.heading) + "</h2>\n";
    for (const auto& e : ch.experiments) {
      h += "<h3>" + esc(e.title) + " (<code>" + esc(e.id) + "</code>)</h3>\n";
      for (const auto& n : e.notes) h += "<p><em>" + esc(n) + "</em></p>\n";
      for (const auto& c : e.charts) {
        const std::string stem = esc(c.spec->stem);
        std::string svg = c.files->svg.empty() ? "" : read_file(c.files->svg);
        h += "<figure>\n";
        if (!svg.empty())
          h += inline_svg(std::move(svg), *c.spec) + "\n";
        else
          h += "<p><strong>" + esc(c.spec->title) + "</strong>: no picture (" +
               esc(c.why_no_picture.empty() ? "gnuplot produced none" : c.why_no_picture) +
               ").</p>\n";
        h += "<figcaption>Data <a href=\"figures/" + stem + ".dat\">" + stem +
             ".dat</a>, gnuplot script <a href=\"figures/" + stem + ".gp\">" + stem + ".gp</a>";
        if (!c.files->png.empty()) h += ", <a href=\"figures/" + stem + ".png\">PNG</a>";
        h += "</figcaption>\n</figure>\n";
        if (!c.spec->notes.empty()) {
          h += "<ul class=\"notes\">\n";
          for (const auto& n : c.spec->notes) h += "<li>" + esc(n) + "</li>\n";
          h += "</ul>\n";
        }
      }
      h += html_table(e.records, several ? 1 : 0);
    }
  }
  return h + "</body>\n</html>\n";
}

}  // namespace

ReportFiles write_report(const std::vector<RunFile>& runs,
                         const std::vector<std::string>& load_errors,
                         const std::filesystem::path& out_dir) {
  ReportFiles out;
  const auto figures = out_dir / "figures";
  std::filesystem::create_directories(figures);
  const auto labels = report_detail::run_labels(runs);

  const std::vector<ChartSpec> charts = build_charts(runs);
  std::vector<std::string> chart_warnings;
  for (const auto& chart : charts) {
    std::string warning;
    try {
      out.charts.push_back(render_chart(chart, figures, warning));
    } catch (const std::exception& e) {  // one chart that cannot be written spoils no other
      out.charts.push_back({});
      warning = chart.stem + ": " + e.what();
    }
    chart_warnings.push_back(warning);
    // gnuplot missing is said once, not once per chart.
    if (!warning.empty() &&
        std::find(out.warnings.begin(), out.warnings.end(), warning) == out.warnings.end())
      out.warnings.push_back(warning);
  }

  std::string title = "concurdl report";
  if (runs.size() == 1) title += ": " + labels.front();
  if (runs.size() > 1)
    title += fmt::format(": {} runs merged ({})", runs.size(), fmt::join(labels, ", "));
  std::size_t n_records = 0;
  for (const auto& r : runs) n_records += r.records.size();
  const std::string subtitle = fmt::format(
      "Generated {} by concurdl {} from {} record{} in {} run{}.", utc_now(), build::version,
      n_records, n_records == 1 ? "" : "s", runs.size(), runs.size() == 1 ? "" : "s");

  const Table runs_t = runs_table(runs, out_dir);
  const Table calibration_t = calibration_table(runs, labels);
  const auto chapter_sections = sections(runs, labels, charts, out.charts, chart_warnings);
  const bool several = runs.size() > 1;

  out.md = out_dir / "report.md";
  out.html = out_dir / "report.html";
  write_file_atomic(out.md, markdown(title, subtitle, load_errors, out.warnings, runs_t,
                                     calibration_t, chapter_sections, several));
  write_file_atomic(out.html, html(title, subtitle, load_errors, out.warnings, runs_t,
                                   calibration_t, chapter_sections, several));
  return out;
}

}  // namespace concurdl
