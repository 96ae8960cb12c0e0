// The report of one run, or of several merged: runs and their provenance, calibration, then per
// chapter and experiment how it was timed, its charts with the models drawn on them and their
// notes (fits, Karp–Flatt), and a table of every record with its named metrics. Written twice
// by report_render.cpp: report.md (figures linked) and report.html (one file, SVG inlined).
#include "concurdl/harness/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/noise.hpp"
#include "report_detail.hpp"

namespace concurdl {

namespace {

using report_detail::busy_machine_warning;
using report_detail::chapter_claims;
using report_detail::ChapterSection;
using report_detail::ChartEntry;
using report_detail::claim_lines;
using report_detail::cores_short_warning;
using report_detail::ExperimentSection;
using report_detail::glance_of;
using report_detail::judge;
using report_detail::JudgedClaim;
using report_detail::provenance_text;
using report_detail::skipped_experiments_note;
using report_detail::Table;

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

std::string value_or_unknown(const nlohmann::json& prov, const std::string& key) {
  const std::string v = provenance_text(prov, key);
  return v.empty() ? "?" : v;
}

// The machine, told apart: "AMD EPYC (Zen 5, family 26 model 2), 2 CPUs, KVM, AVX-512".
std::string cpu_cell(const nlohmann::json& prov) {
  const std::string s = cpu_info::machine_summary(prov);
  return s.empty() ? "?" : s;
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
    t.rows.push_back({dir.empty() ? "?" : dir, value_or_unknown(p, "host"), cpu_cell(p),
                      value_or_unknown(p, "cores"), value_or_unknown(p, "compiler"),
                      value_or_unknown(p, "build_type"), commit, value_or_unknown(p, "started")});
  }
  return t;
}

Table calibration_table(const std::vector<RunFile>& runs, const std::vector<std::string>& labels) {
  Table t;
  t.head = {"run", "memory bandwidth (GB/s)", "peak GFLOP/s, 1 core", "peak GFLOP/s, all cores",
            "thread-to-thread copy (GB/s)"};
  t.numeric = {false, true, true, true, true};
  // The α-β model between MPI ranks, only where a run measured it (under --ranks).
  const bool ranks = std::any_of(runs.begin(), runs.end(),
                                 [](const RunFile& r) { return r.calibration.rank_alpha_s > 0; });
  if (ranks) {
    t.head.insert(t.head.end(), {"rank-to-rank α (µs)", "rank-to-rank 1/β (GB/s)"});
    t.numeric.insert(t.numeric.end(), {true, true});
  }
  auto giga = [](double v) { return v > 0 ? fmt::format("{:.3g}", v / 1e9) : std::string("—"); };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Calibration& c = runs[i].calibration;
    if (c.empty() && c.thread_copy_bytes_per_s == 0 && c.peak_flops_1core == 0) continue;
    t.rows.push_back({labels[i], giga(c.mem_bandwidth_bytes_per_s), giga(c.peak_flops_1core),
                      giga(c.peak_flops), giga(c.thread_copy_bytes_per_s)});
    if (ranks) {
      t.rows.back().push_back(c.rank_alpha_s > 0 ? fmt::format("{:.3g}", c.rank_alpha_s * 1e6)
                                                 : std::string("—"));
      t.rows.back().push_back(c.rank_beta_s_per_byte > 0 ? giga(1 / c.rank_beta_s_per_byte)
                                                         : std::string("—"));
    }
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
    {"fraction_of_roofline", "of roofline", [](double v) { return pct(v); }},
};

using RunRecords = std::vector<std::pair<std::size_t, const Record*>>;  // (run, record)

RunRecords records_of(const std::vector<RunFile>& runs, const std::string& experiment) {
  RunRecords recs;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& r : runs[i].records)
      if (r.experiment == experiment) recs.emplace_back(i, &r);
  return recs;
}

// The named metrics of an experiment's records: in the order the experiment declares them, then
// any others the records carry (an older build's, or an unregistered experiment's), by name.
std::vector<std::string> metric_names(const RunRecords& recs, const Experiment* e) {
  std::set<std::string> present;
  for (const auto& [ri, r] : recs)
    for (const auto& [k, m] : r->metrics) present.insert(k);
  std::vector<std::string> names;
  if (e)
    for (const Metric& m : e->metrics)
      if (present.erase(m.name)) names.push_back(m.name);
  names.insert(names.end(), present.begin(), present.end());
  return names;
}

// "12.0 ms [11.8 ms, 12.3 ms]": a median with its 95% CI, "—" without samples.
std::string median_with_ci(const Summary& s, std::size_t n, const std::string& unit) {
  if (n == 0) return "—";
  std::string out = si(s.median, unit);
  if (s.ci95_lo != 0 || s.ci95_hi != 0)
    out += " [" + si(s.ci95_lo, unit) + ", " + si(s.ci95_hi, unit) + "]";
  return out;
}

Table records_table(const RunRecords& recs, const std::vector<std::string>& labels, bool several,
                    const std::vector<std::string>& metrics) {
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
  if (several) {
    t.head.push_back("run");
    t.numeric.push_back(false);
  }
  for (const char* h : {"parameters", "median", "95% CI", "n"}) t.head.push_back(h);
  for (bool b : {false, true, true, true}) t.numeric.push_back(b);
  for (const auto& m : metrics) {
    t.head.push_back(m + " (median [95% CI])");
    t.numeric.push_back(true);
  }
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
    for (const auto& name : metrics) {
      auto it = r->metrics.find(name);
      const MetricSeries* m = it == r->metrics.end() ? nullptr : &it->second;
      row.push_back(
          m ? median_with_ci(m->stats, m->stats.n ? m->stats.n : m->samples.size(), m->unit) : "—");
    }
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

// How an experiment's samples were timed, when that is worth a line: not the plain host clock.
// Merged runs that timed it differently say which run used which.
std::string timed_by(const RunRecords& recs, const std::vector<std::string>& labels) {
  std::map<std::string, std::set<std::string>> runs_by_timer;  // timer -> run labels
  for (const auto& [ri, r] : recs)
    if (!r->timer.empty()) runs_by_timer[r->timer].insert(labels[ri]);
  if (runs_by_timer.empty() || (runs_by_timer.size() == 1 && runs_by_timer.count("host")))
    return "";
  if (runs_by_timer.size() == 1) return runs_by_timer.begin()->first;
  std::vector<std::string> parts;
  for (const auto& [timer, runs] : runs_by_timer)
    parts.push_back(fmt::format("{} ({})", timer, fmt::join(runs, ", ")));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// What the experiment says its named metrics are: "jain_index: 1 = fair, 1/n = one wins".
std::vector<std::string> metric_notes(const Experiment* e, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  if (!e) return out;
  for (const Metric& m : e->metrics)
    if (!m.what.empty() && std::find(names.begin(), names.end(), m.name) != names.end())
      out.push_back(m.name + (m.unit.empty() ? "" : " (" + m.unit + ")") + ": " + m.what);
  return out;
}

// The models drawn on a chart, each label once (one fit per series may repeat a run's label).
std::vector<std::string> models_drawn(const ChartSpec& chart) {
  std::vector<std::string> out;
  for (const auto& s : chart.series)
    if (s.is_model && !s.points.empty() && std::find(out.begin(), out.end(), s.label) == out.end())
      out.push_back(s.label);
  return out;
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

// An id for links within the report: letters, digits and '-' only.
std::string anchor_of(const std::string& prefix, const std::string& name) {
  std::string out = prefix + "-";
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

// The chapter's lesson README from the report's directory, "" when this program's source tree
// does not have it (a report made elsewhere).
std::string lesson_link(const std::string& folder, const std::filesystem::path& out_dir) {
  namespace fs = std::filesystem;
  const fs::path src = build::source_dir;
  for (const fs::path& p : {src / "chapters" / folder / "README.md", src / folder / "README.md"}) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    const fs::path rel = fs::relative(p, fs::absolute(out_dir), ec);
    return ec || rel.empty() ? p.string() : rel.generic_string();
  }
  return "";
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
    ChapterSection cs;
    cs.heading = chapter_heading(chapter);
    cs.anchor = anchor_of("ch", chapter);
    for (const auto& id : ids) {
      ExperimentSection es;
      es.id = id;
      es.anchor = anchor_of("exp", id);
      const Experiment* e = find_experiment(id);
      es.title = e && !e->title.empty() ? e->title : id;
      if (!e)
        es.notes.push_back(
            "This experiment is not registered in this program, so its figures "
            "are unknown: only its records are shown.");
      for (std::size_t i = 0; i < charts.size(); ++i)
        if (charts[i].experiment == id)
          es.charts.push_back({&charts[i], &files[i], chart_warnings[i], models_drawn(charts[i])});
      // Models are drawn on the charts and listed under them; the table holds records only.
      const RunRecords recs = records_of(runs, id);
      const auto metrics = metric_names(recs, e);
      es.timed_by = timed_by(recs, labels);
      es.records = records_table(recs, labels, runs.size() > 1, metrics);
      es.metrics = metric_notes(e, metrics);
      cs.experiments.push_back(std::move(es));
    }
    out.push_back(std::move(cs));
  }
  return out;
}

}  // namespace

ReportFiles write_report(const std::vector<RunFile>& runs,
                         const std::vector<std::string>& load_errors,
                         const std::filesystem::path& out_dir) {
  ReportFiles out;
  const auto figures = out_dir / "figures";
  std::filesystem::create_directories(figures);
  const auto labels = report_detail::run_labels(runs);

  std::vector<ChartSpec> charts = build_charts(runs);
  for (ChartSpec& c : report_detail::exercise_charts(runs, labels)) charts.push_back(std::move(c));
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

  auto chapter_sections = sections(runs, labels, charts, out.charts, chart_warnings);
  std::vector<report_detail::ExerciseSection> exercise_sections =
      report_detail::exercise_sections(runs, labels);
  for (auto& es : exercise_sections)
    for (std::size_t i = 0; i < charts.size(); ++i)
      if (charts[i].experiment == "exercise/" + es.id)
        es.charts.push_back({&charts[i], &out.charts[i], chart_warnings[i], {}});
  // Said in the report, not on stderr: a report of a noisy run is not a problem of the report.
  std::vector<std::string> warnings = out.warnings;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (std::string w = busy_machine_warning(runs[i], labels[i], runs.size() > 1); !w.empty())
      warnings.push_back(std::move(w));
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (std::string w = cores_short_warning(runs[i], labels[i], runs.size() > 1); !w.empty())
      warnings.push_back(std::move(w));
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (std::string w = skipped_experiments_note(runs[i], labels[i], runs.size() > 1); !w.empty())
      warnings.push_back(std::move(w));
  const std::vector<JudgedClaim> judged = judge(runs);
  std::vector<report_detail::Glance> glance;
  std::vector<ClaimResult> all_results;
  for (const auto& j : judged)
    for (const auto& r : j.per_run)
      if (r) all_results.push_back(*r);
  for (auto& cs : chapter_sections) {
    // The folder is the heading's first word ("01-threads — Threads").
    const std::string folder = cs.heading.substr(0, cs.heading.find(' '));
    cs.lesson = lesson_link(folder, out_dir);
    cs.claims = chapter_claims(judged, folder, labels);
    glance.push_back(glance_of(cs, folder, runs, judged));
  }

  const report_detail::ReportContent content{.title = title,
                                             .subtitle = subtitle,
                                             .load_errors = load_errors,
                                             .warnings = warnings,
                                             .runs = runs_table(runs, out_dir),
                                             .calibration = calibration_table(runs, labels),
                                             .claims = claim_lines(judged, labels),
                                             .claims_summary = claims_counts(all_results),
                                             .glance = glance,
                                             .chapters = chapter_sections,
                                             .exercises = exercise_sections,
                                             .several = runs.size() > 1};
  out.md = out_dir / "report.md";
  out.html = out_dir / "report.html";
  write_file_atomic(out.md, report_detail::markdown(content));
  write_file_atomic(out.html, report_detail::html(content));
  return out;
}

}  // namespace concurdl
