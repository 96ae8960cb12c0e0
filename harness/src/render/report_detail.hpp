// Internal to the harness: run labels shared by the charts (series names) and the report
// (tables), and the report's content, built by report.cpp and written as Markdown and HTML by
// report_render.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"

namespace concurdl::report_detail {

// The run directory's name ("" when the run was not loaded from a file).
std::string run_dir_name(const RunFile& run);
// A provenance field as text, "" when missing.
std::string provenance_text(const nlohmann::json& prov, const std::string& key);
// One label per run: the host, or the directory name where hosts repeat.
std::vector<std::string> run_labels(const std::vector<RunFile>& runs);

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
  std::vector<std::string> models;  // labels of the models drawn on it, listed under it
};

struct ExperimentSection {
  std::string id, title;
  std::string anchor;    // "exp-ch01-false-sharing"
  std::string timed_by;  // how its samples were timed, when not simply "host"
  std::vector<ChartEntry> charts;
  std::vector<std::string> notes;
  Table records;
  std::vector<std::string> metrics;  // "jain_index: what it is", for its named metrics
};

struct ChapterSection {
  std::string heading;
  std::string anchor;  // "ch-01-threads": the id the contents link to
  std::string lesson;  // the lesson README, relative to the report ("" when not found)
  Table claims;        // the chapter's claims, judged on each run (the lesson's headlines)
  std::vector<ExperimentSection> experiments;
};

// One line of "What this run shows": a claim and how it fared (in each run when merged).
struct ClaimLine {
  std::string mark;       // "held", "NOT HELD", "n/a", or a run-by-run summary when merged
  std::string statement;  // "ch01/false_sharing: ..."
  std::string outcome;    // "1.25× (at least 1.1×; reference 1.27×)" or the reason
  bool failed = false;
};

// A row of "Chapters at a glance".
struct Glance {
  std::string heading, anchor, lesson;
  std::string claims;   // "3 of 4 held (1 not applicable)"
  std::string records;  // "94 records, 2 invalid, 3 noisy"
};

// One exercise across the saved attempts of a class (`concurdl exercise --out`): a row per
// attempt, and a chart of the cost ratios against the target.
struct ExerciseSection {
  std::string id, title, anchor;
  Table attempts;
  std::vector<ChartEntry> charts;
};

// The class's exercises: one section per exercise id, in exercise order; empty when no run is
// an exercise attempt. `charts` are appended to `specs` for rendering (ids "exercise/ID").
std::vector<ExerciseSection> exercise_sections(const std::vector<RunFile>& runs,
                                               const std::vector<std::string>& labels);
std::vector<ChartSpec> exercise_charts(const std::vector<RunFile>& runs,
                                       const std::vector<std::string>& labels);
// One row per attempt and exercise, for a spreadsheet.
std::string exercises_csv(const std::vector<RunFile>& runs, const std::vector<std::string>& labels);

// ---- the lessons' claims (report_claims.cpp) ----

// The claims of every run, one row per claim (by experiment and id) in the order first judged.
struct JudgedClaim {
  std::string experiment, id, chapter, statement, expected, reference;
  std::vector<std::optional<ClaimResult>> per_run;
};
std::vector<JudgedClaim> judge(const std::vector<RunFile>& runs);
// "What this run shows": one line per claim.
std::vector<ClaimLine> claim_lines(const std::vector<JudgedClaim>& judged,
                                   const std::vector<std::string>& labels);
// One chapter's claims, a column per run.
Table chapter_claims(const std::vector<JudgedClaim>& judged, const std::string& chapter,
                     const std::vector<std::string>& labels);
// A chapter's row of "Chapters at a glance": its claims held and its flagged records.
Glance glance_of(const ChapterSection& cs, const std::string& chapter,
                 const std::vector<RunFile>& runs, const std::vector<JudgedClaim>& judged);
// "" unless the run was measured on a busy machine; else the report's warning.
std::string busy_machine_warning(const RunFile& run, const std::string& label, bool several);
// "" unless the run's calibration found threads short of cores (calibration detail
// "cores_short": the FMA peak at T threads far below T times one thread's); else one warning
// naming each such thread count.
std::string cores_short_warning(const RunFile& run, const std::string& label, bool several);
// "" unless the run left experiments out (provenance.skipped_experiments: no GPU, ...); else
// one line naming each and why.
std::string skipped_experiments_note(const RunFile& run, const std::string& label, bool several);

struct ReportContent {
  std::string title, subtitle;
  std::vector<std::string> load_errors, warnings;
  Table runs, calibration;
  std::vector<ClaimLine> claims;  // "What this run shows"
  std::string claims_summary;     // "9 held, 1 not held, 3 not applicable"
  std::vector<Glance> glance;
  std::vector<ChapterSection> chapters;
  std::vector<ExerciseSection> exercises;  // class results, when the runs are exercise attempts
  bool several = false;  // merged runs: the records tables start with a run column
};

std::string markdown(const ReportContent& r);
// One self-contained file: figures inlined as SVG, no scripts, nothing fetched.
std::string html(const ReportContent& r);

}  // namespace concurdl::report_detail
