// An experiment's parameter axes: the values each takes per profile, their kind and limits, and
// the check that refuses a bad `--set` before anything runs. Variant tables (variants.hpp) make
// their axes here; the harness's experiments (harness/experiment.hpp) declare the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/params.hpp"

namespace concurdl {

struct Axis {
  std::string name;
  std::vector<std::string> values;  // the full profile's values
  std::vector<std::string> quick;   // the quick profile's values; empty = same as `values`
  AxisKind kind = AxisKind::text;
  // Numeric kinds: the largest value the experiment takes. Every numeric axis of a chapter
  // declares one (tests/test_axis_limits.cpp holds them to it): what fits in memory on a big
  // machine (max_elements), what the code counts without overflow, or what ends in reasonable
  // time, so that `--set n=99999999999` is a usage error naming the limit, not a failed
  // allocation or a run that never ends. 0: no limit but the kind's own.
  std::int64_t max = 0;
  // The smoke profile's values; empty: every quick value of a text axis (each variant's glue
  // runs), the smallest quick value of a numeric one.
  std::vector<std::string> smoke;
  // Numeric kinds: the smallest value, where the experiment needs more than the kind allows
  // (count and size: 1; integer and real: any): 0 for a percentage or a latency.
  std::optional<std::int64_t> min;
  // A text axis takes the values it lists (in any profile) and nothing else, unless it has a
  // `check`: then the check decides, throwing UsageError on a value it refuses. A variant
  // table's axis checks against its rows (and says why a row cannot run here); an open axis
  // (chapter 07's straggler, any factor like 3x) parses. Either way `--set` is refused before
  // anything is calibrated or measured.
  std::function<void(std::string_view)> check;
};

// check_value() for this axis, and its `min` and `max`.
void check_axis_value(const Axis& a, std::string_view text);

// Limits that axes of one kind share, so that they agree across the chapters.
// Threads, workers, processes and ranks: more than any machine has hardware threads, and few
// enough that a sweep cannot exhaust the process table. thread_counts() stops there too.
inline constexpr std::int64_t kMaxThreads = 4096;
// Elements of `bytes_each` bytes in one array of at most 32 GiB (2^33 floats): what a big
// machine holds with room for the rest of the run.
constexpr std::int64_t max_elements(std::int64_t bytes_each) {
  return (std::int64_t{1} << 35) / bytes_each;
}

// Configurations that do not apply: for those matching `when`, the listed axes mean nothing
// (the sync loader has no workers), so the sweep keeps one configuration instead of measuring
// the same thing once per value, and the record leaves those parameters out.
struct Inapplicable {
  Params when;                    // {{"loader", "sync"}}
  std::vector<std::string> axes;  // {"workers"}
};

}  // namespace concurdl
