// Running experiments: sweep expansion, validation, warm-up, interleaved repetitions,
// statistics, derived metrics, and the progress line.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

struct Config;

struct RunOptions {
  Profile profile = Profile::quick;
  std::optional<std::vector<std::string>> threads;      // --threads, replaces the threads axis
  std::optional<std::vector<std::string>> ranks;        // --ranks, replaces the ranks axis
  std::optional<int> repeat;                            // --repeat
  std::map<std::string, std::vector<std::string>> set;  // --set key=v1,v2
  bool progress = true;
  // --trace: the spans (trace.hpp) of each configuration's last timed repetition, written as
  // DIR/EXPERIMENT/CONFIG.json with a Gantt chart beside it (empty: no timelines).
  std::filesystem::path trace_dir;
  // The cores probe (cores_probe.hpp) before and after each group of configurations, on a
  // machine of 2 CPUs or more: records timed while the CPUs were not a core each are noted
  // "cores_short". `concurdl run` turns it on; tests leave it off (24 ms a group).
  bool probe_cores = false;
  // A configuration this machine cannot run (its prepare threw Unavailable, on every rank
  // alike): left out of the records and told here with the reason; the rest is measured.
  std::function<void(const Config&, const std::string&)> on_unavailable;
};

// One configuration of one experiment, after expansion.
struct Config {
  const Experiment* experiment = nullptr;
  Params params;
};

// Expand the experiments' axes under the options. Checks every value against its axis kind and
// every --set key against the axes (a key no selected experiment has is an error). Throws
// UsageError naming the parameter and value.
std::vector<Config> expand(const std::vector<const Experiment*>& selected, const RunOptions& opt);

// Progress on stderr: one updating line on a terminal, a line every few seconds otherwise.
class Progress {
 public:
  Progress(std::size_t total, bool enabled);
  ~Progress();
  void step(const std::string& what);  // starting configuration `what`
  void done();

 private:
  std::size_t total_, current_ = 0;
  bool enabled_, tty_;
  double start_, last_print_ = -1e9;
};

// Run configurations (grouped and interleaved as each experiment declares) and return one
// record per configuration with statistics and derived metrics filled in. A failed validation
// gives a record with valid = false (the run goes on); UsageError propagates.
// `after_experiment` is called with all records so far after each group and each experiment
// finishes, so the caller can save them: nothing measured is lost if a later one crashes or the
// run is stopped (speedups of an unfinished experiment are derived when it finishes).
// After request_stop() (a signal handler may call it) the run stops before its next group by
// throwing Interrupted.
std::vector<Record> run_configs(
    const std::vector<Config>& configs, const RunOptions& opt, const Calibration& calib,
    const std::function<void(const std::vector<Record>&)>& after_experiment = {});

// Fill speedup, efficiency, karp_flatt and fraction_of_ceiling from baselines and calibration.
// `cpus`: the CPUs the run had (provenance.cores); a speedup above them (10% tolerance) is
// flagged above_ceiling as a figure above the calibration is; 0: not known, not checked.
// Exposed for tests and for merging micro-benchmark records.
void derive_metrics(std::vector<Record>& records, const Calibration& calib, unsigned cpus = 0);
// A timed record whose trial declared the device's roofline (Trial::bound): its
// roofline_time_s and fraction_of_roofline, and the record failed as impossible when its fastest
// repetition beat that time by more than kImpossibleMargin. Nothing when `b` bounds nothing.
void judge_roofline(Record& r, const Work& w, const Trial::Bound& b);

int default_repetitions(Profile p);

// Ask a running run_configs to stop before its next group (async-signal-safe).
void request_stop();
bool stop_requested();
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace concurdl
