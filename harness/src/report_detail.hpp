// Internal to the harness: run labels shared by charts.cpp (series names) and report.cpp (tables).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "concurdl/harness/records.hpp"

namespace concurdl::report_detail {
// The run directory's name ("" when the run was not loaded from a file).
std::string run_dir_name(const RunFile& run);
// A provenance field as text, "?" when missing.
std::string provenance_text(const nlohmann::json& prov, const std::string& key);
// One label per run: the host, or the directory name where hosts repeat.
std::vector<std::string> run_labels(const std::vector<RunFile>& runs);
}  // namespace concurdl::report_detail
