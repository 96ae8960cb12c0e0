// What runner.cpp and runner_takes.cpp share: a configuration's slot while its group is
// measured, one measurement of a group, and the takes of a group (runner_takes.cpp).
#pragma once

#include <fmt/format.h>

#include <exception>
#include <filesystem>
#include <memory>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/noise.hpp"
#include "concurdl/harness/runner.hpp"

namespace concurdl::runner_detail {

// Wraps a timer for an experiment across MPI ranks: barrier, the inner timer on each rank, then
// the max over the current Group's ranks (rank_timer.cpp).
std::shared_ptr<Timer> max_over_ranks_timer(std::shared_ptr<Timer> inner);

struct Slot {
  const Config* config = nullptr;
  Trial trial;
  Record record;
  Timer* timer = nullptr;
  bool across_ranks = false;
  NoiseMeter noise;         // other processes' CPU time during the timed repetitions
  std::string unavailable;  // why this machine cannot run it (prepare threw Unavailable)
};

// Anything a chapter's code throws becomes the record's reason; bad input stays a usage error.
template <class F>
void guarded(Slot& s, const char* when, F&& f) {
  try {
    f();
  } catch (const UsageError&) {
    throw;
  } catch (const Unavailable& e) {
    s.record.valid = false;
    s.record.validation = fmt::format("{}: cannot run here: {}", when, e.what());
    s.unavailable = e.what();
  } catch (const std::exception& e) {
    s.record.valid = false;
    s.record.validation = fmt::format("{}: {}", when, e.what());
  } catch (...) {
    s.record.valid = false;
    s.record.validation = fmt::format("{}: an exception that is not a std::exception", when);
  }
}

// Prepares, checks, warms up and times every slot of a group, round-robin, and checks again.
// `progress` is null when the group is measured again (a later take).
void measure_group(std::vector<Slot>& slots, int repetitions, int warmup, Progress* progress,
                   const std::filesystem::path& trace_dir = {});
// The group's records, with statistics and derived metrics, moved out of its measured slots.
std::vector<Record> finish_group(const Experiment& e, std::vector<Slot>& slots);

// A group of an experiment, between cores probes when `opt` asks for them (runner_takes.cpp).
std::vector<Record> measure_probed_group(const Experiment& e, std::vector<Slot>& slots, int reps,
                                         Progress& progress, const RunOptions& opt);
// A calibration group, taken until its figures agree (runner_takes.cpp).
std::vector<Record> measure_calibration_group(const Experiment& e, std::vector<Slot>& slots,
                                              int reps, int warmup, Progress& progress,
                                              bool verbose);

}  // namespace concurdl::runner_detail
