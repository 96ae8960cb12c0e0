// `concurdl calibrate`: this machine's ceilings, measured by registered experiments under the
// "calibration" chapter (memory copy and triad over arrays >= 4x the last-level cache at
// 1..N threads, an FMA loop on one and on all cores, thread-to-thread copy bandwidth).
// Every run measures them first so that records can say "73% of measured bandwidth".
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/harness/records.hpp"

namespace concurdl {

inline constexpr const char* kCalibrationChapter = "00-calibration";

// The calibration figures distilled from the calibration experiments' records.
Calibration calibration_from_records(const std::vector<Record>& records);

// Calibration takes each figure again until two consecutive takes agree: a figure measured
// while something else ran is lower than a quiet one, and a second take that differs says so.
inline constexpr double kCalibrationTolerance = 0.05;  // relative, of the larger of the two
inline constexpr int kCalibrationMaxTakes = 4;

// Whether every figure of `a` is within `tolerance` of its counterpart in `b` (relative to the
// larger of the two; two zeros agree).
bool takes_agree(const std::vector<double>& a, const std::vector<double>& b, double tolerance);

struct Takes {
  std::vector<std::vector<double>> figures;  // each take's figures, in order
  bool agreed = false;                       // the last two takes agree (or there is nothing)
};
// Calls `take` (which measures and returns its figures) until two consecutive takes agree within
// `tolerance`, at most `max_takes` times. A take with no figures is final: nothing to agree on.
Takes agreeing_takes(const std::function<std::vector<double>()>& take, double tolerance,
                     int max_takes);

// The figures one group of a calibration experiment's records gives, each a rate where higher
// is better: for an experiment with the peak-FLOP/s ceiling, the best flops_per_s over the
// group ("peak FLOP/s, all cores") and, where the group has more than one thread count, the
// 1-thread one ("peak FLOP/s, 1 core"); for one with the memory-bandwidth ceiling, the best
// bytes_per_s ("memory bandwidth"). Empty for any other experiment. The runner measures such a
// group again until these agree (run_configs).
std::vector<std::pair<std::string, double>> calibration_figures(const std::vector<Record>& group);

// Last-level cache size in bytes (sysfs), or 32 MiB if the machine does not say.
std::size_t last_level_cache_bytes();
// Elements (doubles) per array of the memory experiments: 4x the last-level cache, at least
// 32 MiB.
std::size_t calibration_array_elements();

}  // namespace concurdl
