// The report's two forms: report.md (figures linked) and report.html (one file, SVG figures
// inlined, no scripts, nothing fetched from elsewhere). The content is report.cpp's.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "report_detail.hpp"

namespace concurdl::report_detail {

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string no_picture(const ChartEntry& c) {
  return c.why_no_picture.empty() ? "gnuplot produced none" : c.why_no_picture;
}

// "Models drawn: ideal (S = p); model: alpha-beta ring", or "" when none.
std::string models_line(const ChartEntry& c) {
  if (c.models.empty()) return "";
  std::string out = "Models drawn: ";
  for (std::size_t i = 0; i < c.models.size(); ++i) out += (i ? "; " : "") + c.models[i];
  return out;
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

// Cells are appended piece by piece: `" " + std::string&&` trips GCC 12's -Wrestrict here.
std::string md_table(const Table& t, int code_column = -1) {
  std::string out = "|";
  for (const auto& h : t.head) out.append(" ").append(md_cell(h)).append(" |");
  out += "\n|";
  for (std::size_t i = 0; i < t.head.size(); ++i) out += t.numeric[i] ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool code = static_cast<int>(i) == code_column && !row[i].empty();
      const char* quote = code ? "`" : "";
      out.append(" ").append(quote).append(md_cell(row[i])).append(quote).append(" |");
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

std::string md_chart(const ChartEntry& c) {
  const std::string stem = c.spec->stem;
  std::string md;
  if (!c.files->svg.empty())
    md += "![" + md_alt(c.spec->title) + "](figures/" + stem + ".svg)\n\n";
  else
    md += "**" + c.spec->title + "**: no picture (" + no_picture(c) + ").\n\n";
  md += "Data [" + stem + ".dat](figures/" + stem + ".dat), gnuplot script [" + stem +
        ".gp](figures/" + stem + ".gp)";
  if (!c.files->png.empty()) md += ", [PNG](figures/" + stem + ".png)";
  md += "\n\n";
  if (!c.models.empty()) md += models_line(c) + "\n\n";
  for (const auto& n : c.spec->notes) md += "- " + n + "\n";
  if (!c.spec->notes.empty()) md += "\n";
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

std::string html_chart(const ChartEntry& c) {
  const std::string stem = esc(c.spec->stem);
  std::string svg = c.files->svg.empty() ? "" : read_file(c.files->svg);
  std::string h = "<figure>\n";
  if (!svg.empty())
    h += inline_svg(std::move(svg), *c.spec) + "\n";
  else
    h += "<p><strong>" + esc(c.spec->title) + "</strong>: no picture (" + esc(no_picture(c)) +
         ").</p>\n";
  h += "<figcaption>Data <a href=\"figures/" + stem + ".dat\">" + stem +
       ".dat</a>, gnuplot script <a href=\"figures/" + stem + ".gp\">" + stem + ".gp</a>";
  if (!c.files->png.empty()) h += ", <a href=\"figures/" + stem + ".png\">PNG</a>";
  if (!c.models.empty()) h += "<br>" + esc(models_line(c));
  h += "</figcaption>\n</figure>\n";
  if (!c.spec->notes.empty()) {
    h += "<ul class=\"notes\">\n";
    for (const auto& n : c.spec->notes) h += "<li>" + esc(n) + "</li>\n";
    h += "</ul>\n";
  }
  return h;
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
ul.claims li.failed { color: #b00020; }
nav ul { margin: .2em 0; } nav li { margin: .1em 0; }
)css";

// The report's sections before the chapters, for the contents: (anchor, heading).
std::vector<std::pair<std::string, std::string>> top_sections(const ReportContent& r) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("claims", "What this run shows");
  if (!r.exercises.empty()) out.emplace_back("exercises", "Class results: exercises");
  out.emplace_back("glance", "Chapters at a glance");
  out.emplace_back("runs", "Runs");
  if (!r.calibration.rows.empty()) out.emplace_back("calibration", "Calibration");
  return out;
}

// Markdown has no ids of its own: an empty anchor before the heading works on every renderer.
std::string md_anchor(const std::string& id) { return "<a id=\"" + id + "\"></a>\n\n"; }

// Chapters at a glance, its chapter and lesson cells made links.
Table glance_table(const ReportContent& r, bool markdown_links) {
  Table t;
  t.head = {"chapter", "lesson", "claims", "records"};
  t.numeric = {false, false, false, false};
  for (const auto& g : r.glance) {
    if (markdown_links)
      t.rows.push_back({"[" + md_alt(g.heading) + "](#" + g.anchor + ")",
                        g.lesson.empty() ? "—" : "[README](" + g.lesson + ")", g.claims,
                        g.records});
    else
      t.rows.push_back({g.heading, g.lesson, g.claims, g.records});
  }
  return t;
}

std::string html_glance(const ReportContent& r) {
  std::string h =
      "<table>\n<thead><tr><th>chapter</th><th>lesson</th><th>claims</th><th>records</th></tr>"
      "</thead>\n<tbody>\n";
  for (const auto& g : r.glance) {
    h += "<tr><td><a href=\"#" + g.anchor + "\">" + esc(g.heading) + "</a></td><td>";
    h += g.lesson.empty() ? "—" : "<a href=\"" + esc(g.lesson) + "\">README</a>";
    h += "</td><td>" + esc(g.claims) + "</td><td>" + esc(g.records) + "</td></tr>\n";
  }
  return h + "</tbody>\n</table>\n";
}

}  // namespace

std::string markdown(const ReportContent& r) {
  std::string md = "# " + r.title + "\n\n" + r.subtitle + "\n\n";
  if (!r.load_errors.empty()) {
    md += "## Files that could not be loaded\n\n";
    for (const auto& e : r.load_errors) md += "- `" + e + "`\n";
    md += "\n";
  }
  if (!r.warnings.empty()) {
    md += "## Warnings\n\n";
    for (const auto& w : r.warnings) md += "- " + w + "\n";
    md += "\n";
  }
  md += md_anchor("claims") + "## What this run shows\n\n";
  if (r.claims.empty()) md += "No experiment of this run makes a claim.\n\n";
  for (const auto& c : r.claims)
    md += "- **" + c.mark + "** " + c.statement + " — " + c.outcome + "\n";
  if (!r.claims.empty()) md += "\n" + r.claims_summary + ".\n\n";
  if (!r.exercises.empty()) {
    md += md_anchor("exercises") + "## Class results: exercises\n\n";
    for (const auto& e : r.exercises) {
      md += md_anchor(e.anchor) + "### Exercise " + e.id + ": " + e.title + "\n\n";
      for (const auto& c : e.charts) md += md_chart(c);
      md += md_table(e.attempts) + "\n";
    }
  }
  md +=
      md_anchor("glance") + "## Chapters at a glance\n\n" + md_table(glance_table(r, true)) + "\n";
  md += "## Contents\n\n";
  for (const auto& [anchor, text] : top_sections(r))
    md += "- [" + md_alt(text) + "](#" + anchor + ")\n";
  for (const auto& ch : r.chapters) {
    md += "- [" + md_alt(ch.heading) + "](#" + ch.anchor + ")\n";
    for (const auto& e : ch.experiments) md += "  - [" + md_alt(e.title) + "](#" + e.anchor + ")\n";
  }
  md += "\n";
  md += md_anchor("runs") + "## Runs\n\n" + md_table(r.runs) + "\n";
  if (!r.calibration.rows.empty())
    md += md_anchor("calibration") + "## Calibration\n\n" + md_table(r.calibration) + "\n";
  for (const auto& ch : r.chapters) {
    md += md_anchor(ch.anchor) + "## " + ch.heading + "\n\n";
    if (!ch.lesson.empty()) md += "The lesson: [" + ch.lesson + "](" + ch.lesson + ")\n\n";
    if (!ch.claims.rows.empty()) md += "What the lesson claims:\n\n" + md_table(ch.claims) + "\n";
    for (const auto& e : ch.experiments) {
      md += md_anchor(e.anchor) + "### " + e.title + " (`" + e.id + "`)\n\n";
      if (!e.timed_by.empty()) md += "timed by: " + e.timed_by + "\n\n";
      for (const auto& n : e.notes) md += "*" + n + "*\n\n";
      for (const auto& c : e.charts) md += md_chart(c);
      md += md_table(e.records, r.several ? 1 : 0) + "\n";
      for (const auto& m : e.metrics) md += "- " + m + "\n";
      if (!e.metrics.empty()) md += "\n";
    }
  }
  return md;
}

std::string html(const ReportContent& r) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + esc(r.title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n";
  h += "<h1>" + esc(r.title) + "</h1>\n<p class=\"muted\">" + esc(r.subtitle) + "</p>\n";
  if (!r.load_errors.empty()) {
    h += "<div class=\"box\">\n<h2>Files that could not be loaded</h2>\n<ul>\n";
    for (const auto& e : r.load_errors) h += "<li><code>" + esc(e) + "</code></li>\n";
    h += "</ul>\n</div>\n";
  }
  if (!r.warnings.empty()) {
    h += "<div class=\"box warn\">\n<h2>Warnings</h2>\n<ul>\n";
    for (const auto& w : r.warnings) h += "<li>" + esc(w) + "</li>\n";
    h += "</ul>\n</div>\n";
  }
  h += "<h2 id=\"claims\">What this run shows</h2>\n";
  if (r.claims.empty()) h += "<p>No experiment of this run makes a claim.</p>\n";
  if (!r.claims.empty()) {
    h += "<ul class=\"claims\">\n";
    for (const auto& c : r.claims)
      h += std::string(c.failed ? "<li class=\"failed\">" : "<li>") + "<strong>" + esc(c.mark) +
           "</strong> " + esc(c.statement) + " — " + esc(c.outcome) + "</li>\n";
    h += "</ul>\n<p>" + esc(r.claims_summary) + ".</p>\n";
  }
  if (!r.exercises.empty()) {
    h += "<h2 id=\"exercises\">Class results: exercises</h2>\n";
    for (const auto& e : r.exercises) {
      h += "<h3 id=\"" + e.anchor + "\">Exercise " + esc(e.id) + ": " + esc(e.title) + "</h3>\n";
      for (const auto& c : e.charts) h += html_chart(c);
      h += html_table(e.attempts);
    }
  }
  h += "<h2 id=\"glance\">Chapters at a glance</h2>\n" + html_glance(r);
  h += "<nav>\n<h2 id=\"contents\">Contents</h2>\n<ul>\n";
  for (const auto& [anchor, text] : top_sections(r))
    h += "<li><a href=\"#" + anchor + "\">" + esc(text) + "</a></li>\n";
  for (const auto& ch : r.chapters) {
    h += "<li><a href=\"#" + ch.anchor + "\">" + esc(ch.heading) + "</a>\n<ul>\n";
    for (const auto& e : ch.experiments)
      h += "<li><a href=\"#" + e.anchor + "\">" + esc(e.title) + "</a></li>\n";
    h += "</ul></li>\n";
  }
  h += "</ul>\n</nav>\n";
  h += "<h2 id=\"runs\">Runs</h2>\n" + html_table(r.runs);
  if (!r.calibration.rows.empty())
    h += "<h2 id=\"calibration\">Calibration</h2>\n" + html_table(r.calibration);
  for (const auto& ch : r.chapters) {
    h += "<h2 id=\"" + ch.anchor + "\">" + esc(ch.heading) + "</h2>\n";
    if (!ch.lesson.empty())
      h += "<p>The lesson: <a href=\"" + esc(ch.lesson) + "\">" + esc(ch.lesson) + "</a></p>\n";
    if (!ch.claims.rows.empty()) h += "<p>What the lesson claims:</p>\n" + html_table(ch.claims);
    for (const auto& e : ch.experiments) {
      h += "<h3 id=\"" + e.anchor + "\">" + esc(e.title) + " (<code>" + esc(e.id) +
           "</code>)</h3>\n";
      if (!e.timed_by.empty()) h += "<p class=\"muted\">timed by: " + esc(e.timed_by) + "</p>\n";
      for (const auto& n : e.notes) h += "<p><em>" + esc(n) + "</em></p>\n";
      for (const auto& c : e.charts) h += html_chart(c);
      h += html_table(e.records, r.several ? 1 : 0);
      if (!e.metrics.empty()) {
        h += "<ul class=\"notes\">\n";
        for (const auto& m : e.metrics) h += "<li>" + esc(m) + "</li>\n";
        h += "</ul>\n";
      }
    }
  }
  return h + "</body>\n</html>\n";
}

}  // namespace concurdl::report_detail
