// Result records, schema v2 (docs/results-schema.md). The field names are a promise to outside
// tools: fields may be added, but these keep their meaning. Version 1 files (no `metrics`,
// no `timer`) still load.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/core/params.hpp"
#include "concurdl/harness/stats.hpp"

namespace concurdl {

inline constexpr int kSchemaVersion = 2;
inline constexpr int kOldestSchemaVersion = 1;

// One named metric of a record (Experiment::metrics): its samples, in the order measured, and
// their statistics.
struct MetricSeries {
  std::string unit;
  bool lower_is_better = false;
  std::vector<double> samples;
  Summary stats;
};

struct Record {
  std::string experiment;  // "ch01/sum_memory_bound"
  std::string chapter;     // "01-threads"
  Params params;
  std::string metric = "time";
  std::string unit = "s";
  bool lower_is_better = true;
  std::vector<double> samples;  // every repetition's raw value, in the order measured
  Summary stats;
  std::map<std::string, double> derived;  // items_per_s, bytes_per_s, speedup, efficiency, ...
  std::map<std::string, MetricSeries> metrics;  // the named metrics beside `metric`
  std::string timer;  // how the samples were timed: "host", "cuda_events", "max_over_ranks(host)"
  bool valid = true;
  std::string validation;                    // what was wrong when !valid
  std::map<std::string, std::string> notes;  // Trial::notes; written only when not empty

  // Timed on a device (a GPU's events): its own roofline bounds it, not the CPU's calibration.
  bool timed_on_a_device() const { return timer.find("cuda_events") != std::string::npos; }
};

struct Calibration {
  double mem_bandwidth_bytes_per_s = 0;  // best of copy/triad over threads
  double peak_flops = 0;                 // FMA loop, all cores
  double peak_flops_1core = 0;
  double thread_copy_bytes_per_s = 0;
  // Between two MPI ranks (calibrate/rank_pingpong, under --ranks): the one-way time of a
  // message of n bytes is about alpha + beta * n.
  double rank_alpha_s = 0;
  double rank_beta_s_per_byte = 0;
  nlohmann::json detail = nlohmann::json::object();  // per-thread figures, array sizes, ...
  bool empty() const {
    return mem_bandwidth_bytes_per_s == 0 && peak_flops == 0 && rank_alpha_s == 0;
  }
};

struct RunFile {
  int schema_version = kSchemaVersion;
  std::string concurdl_version;
  std::vector<std::string> command;
  nlohmann::json provenance = nlohmann::json::object();
  Calibration calibration;
  std::vector<Record> records;
  // The lesson claims as judged when the run was written (claims.hpp), for outside tools:
  // concurdl itself judges them again from the records. Null: not judged (an older run).
  nlohmann::json claims;
  // An exercise attempt saved by `concurdl exercise --out` (one object per exercise: tests,
  // verdict, cost ratio and interval, target); null in a run of experiments.
  nlohmann::json exercises;
  std::filesystem::path path;  // where it was loaded from (not serialized)
  // What merged reports call it, when the user names it (concurdl report --label); else the
  // machine it ran on (not serialized).
  std::string label;
};

// The machine a run was taken on, as merged charts and the claims x machines table name it:
// the CPU's microarchitecture and the CPUs the run had ("Zen 5, 2 CPUs", "Emerald Rapids, 16
// CPUs"); the CPU's model name where the microarchitecture is not known; "" when the run says
// neither.
std::string machine_label(const RunFile& run);

nlohmann::json to_json(const Record& r);
nlohmann::json to_json(const Calibration& c);
nlohmann::json to_json(const RunFile& f);

// Parse a results document. Throws UsageError "FILE: field 'records[3].samples': expected an
// array of numbers" and the like; `where` names the file in messages.
RunFile run_from_json(const nlohmann::json& j, const std::string& where);

// Load RUN_DIR/results.json (or a results.json path). Throws UsageError naming the file and
// what is wrong (missing, truncated, not JSON, foreign schema, bad field).
RunFile load_run(const std::filesystem::path& dir_or_file);

// Load several; a bad one is reported in `errors` ("path: what") and the rest still load.
std::vector<RunFile> load_runs(const std::vector<std::filesystem::path>& paths,
                               std::vector<std::string>& errors);

// Write `content` to `path` atomically: a temporary file in the same directory, written,
// flushed and fsync'ed, then renamed over `path`. A crash leaves the old file or none, never
// half of one. Throws std::runtime_error with the path and errno text on failure.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);
void write_run(const std::filesystem::path& run_dir, const RunFile& f);

// Create a new run directory under `root`: <UTC time>-<host>-<short sha>, with -2, -3, ...
// appended if that name exists. Never reuses an existing directory.
std::filesystem::path make_run_dir(const std::filesystem::path& root, const std::string& host,
                                   const std::string& short_sha);

}  // namespace concurdl
