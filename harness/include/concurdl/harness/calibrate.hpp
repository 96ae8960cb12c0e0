// `concurdl calibrate`: this machine's ceilings, measured by registered experiments under the
// "calibration" chapter (memory copy and triad over arrays >= 4x the last-level cache at
// 1..N threads, an FMA loop on one and on all cores, thread-to-thread copy bandwidth).
// Every run measures them first so that records can say "73% of measured bandwidth".
#pragma once

#include <vector>

#include "concurdl/harness/records.hpp"

namespace concurdl {

inline constexpr const char* kCalibrationChapter = "00-calibration";

// The calibration figures distilled from the calibration experiments' records.
Calibration calibration_from_records(const std::vector<Record>& records);

// Last-level cache size in bytes (sysfs), or 32 MiB if the machine does not say.
std::size_t last_level_cache_bytes();

}  // namespace concurdl
