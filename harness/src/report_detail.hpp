// Internal to the harness: run labels shared by the charts (series names) and the report
// (tables), and the report's content, built by report.cpp and written as Markdown and HTML by
// report_render.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
  std::string timed_by;  // how its samples were timed, when not simply "host"
  std::vector<ChartEntry> charts;
  std::vector<std::string> notes;
  Table records;
  std::vector<std::string> metrics;  // "jain_index: what it is", for its named metrics
};

struct ChapterSection {
  std::string heading;
  std::vector<ExperimentSection> experiments;
};

struct ReportContent {
  std::string title, subtitle;
  std::vector<std::string> load_errors, warnings;
  Table runs, calibration;
  std::vector<ChapterSection> chapters;
  bool several = false;  // merged runs: the records tables start with a run column
};

std::string markdown(const ReportContent& r);
// One self-contained file: figures inlined as SVG, no scripts, nothing fetched.
std::string html(const ReportContent& r);

}  // namespace concurdl::report_detail
