// Helpers shared by chapter 02's experiments_*.cpp: reading the parameters every lock
// experiment has (cs, duration_ms) and thread axes.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/params.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/locks/lock_variants.hpp"

namespace concurdl::locks::experiments {

// The "cs" parameter: a name from kCriticalSections -> cs_work steps on this machine.
inline std::uint32_t cs_steps_of(const Params& p) {
  const std::string& name = param_str(p, "cs");
  for (const CriticalSection& cs : kCriticalSections)
    if (cs.name == name) return cs_steps_for(cs.ns);
  throw UsageError(fmt::format("parameter 'cs': '{}' is not one of empty, 100ns, 1us", name));
}

inline std::vector<std::string> cs_names() {
  std::vector<std::string> names;
  for (const CriticalSection& cs : kCriticalSections) names.emplace_back(cs.name);
  return names;
}

// The longest run a "duration_ms" axis takes (Axis::max): a minute, for every repetition.
inline constexpr std::int64_t kMaxDurationMs = 60'000;

inline std::chrono::milliseconds duration_of(const Params& p) {
  return std::chrono::milliseconds(param_int(p, "duration_ms"));
}

// thread_counts() without 1 (a fairness index or a producer/consumer pair needs two threads).
inline std::vector<std::string> thread_counts_from_two() {
  std::vector<std::string> out;
  for (const std::string& t : thread_counts())
    if (t != "1") out.push_back(t);
  return out;
}

}  // namespace concurdl::locks::experiments
