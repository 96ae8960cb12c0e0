// What chapter 06's experiment files share (experiments_pipeline.cpp: ch06/pipeline and the
// pipeline's trial; experiments_recompute.cpp: ch06/recompute, the same trial with and without
// recomputation; experiments_schedules.cpp: ch06/schedules, the trial under 1F1B, interleaved
// and ZB-H1, and the timings of exercises 6.2 and 6.3; experiments_tensor.cpp:
// ch06/tensor_parallel and the timing of exercise 6.1).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"

namespace concurdl::mp::detail {

inline constexpr std::int64_t kMaxWidth = 16384;
inline constexpr std::int64_t kMaxRows = 1 << 16;

// n floats in [-1, 1) from a linear congruential generator: inputs and weights that do not
// depend on the platform's random library.
inline std::vector<float> pseudo_random(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

// One pipeline step of a `layers`-deep MLP of `width` over `stages` thread ranks (the axes of
// ch06/pipeline, and `recompute` on or off where the experiment has that axis), validated
// against one process's gradients (experiments_pipeline.cpp).
Trial pipeline_trial(const Params& p, GroupCache& cache);
// Its metrics, and the model's axes (width, layers, rows), for every experiment that runs it.
// Functions, not globals: the registrations in other files run at static initialisation.
const std::vector<Metric>& pipeline_metrics();
const std::vector<Axis>& pipeline_model_axes();
// The axes the schedules and recomputation experiments sweep after their schedule (and chunks):
// recompute off/on, p = 2 and 4 stages, m = 4, 8, 16 micro-batches, then the model's axes.
std::vector<Axis> pipeline_sweep_axes();

// The `chunks` parameter (interleaved's v), 1 where the experiment has no such axis.
int chunks_of(const Params& p);
// The records' derived bubble_model (the schedule's row's formula at the record's p, m, v) and
// bubble_error (|measured - model|).
void derive_bubble(const Params& p, const Work& w, Record& r);
// The model's bubble of `schedule` at p stages and v chunks, as a curve over m.
Model bubble_curve(int p, const std::string& schedule, const std::string& label, int v = 1);
// The bytes the busiest stage of the axes' default MLP (16 layers of 256, 512 rows) keeps at p
// stages and v chunks, m = the point's x, by the schedule's orders (activation_model): a curve
// labelled `label`, drawn at the x values of `series`.
Model bytes_curve(int p, const std::string& schedule, int v, bool recompute,
                  const std::string& label, const std::string& series);

// The device counts the α–β projections are drawn at.
inline std::vector<double> projection_devices() { return {1, 2, 4, 8, 16, 32, 64}; }

// The exercises' timings (exercise_timings.hpp). Features and rows: 2^14 each keeps one matrix
// at most 1 GiB.
inline constexpr std::int64_t kMaxExerciseDim = std::int64_t{1} << 14;
// Trials of a few milliseconds whose two threads share the machine's cores with everything else
// on it: more repetitions than kExerciseRepetitions, so that the interval of the ratio of
// medians is narrow enough to judge (still well under a second per exercise).
inline constexpr int kExerciseTrialRepetitions = 41;
// What an exercise's trial fills its outputs with before it runs: a value left unwritten fails
// the check.
inline constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

// "" when every element of got is within float tolerance of want, else the first that is not.
inline std::string first_difference(std::span<const float> got, std::span<const float> want,
                                    const std::string& what) {
  if (got.size() != want.size())
    return fmt::format("{}: {} values, expected {}", what, got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i]))))
      return fmt::format("{}[{}] is {}, one process computes {}", what, i, got[i], want[i]);
  return "";
}

}  // namespace concurdl::mp::detail
