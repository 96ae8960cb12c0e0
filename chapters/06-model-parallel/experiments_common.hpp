// What chapter 06's experiment files share (experiments_pipeline.cpp: ch06/pipeline and the
// pipeline's trial; experiments_recompute.cpp: ch06/recompute, the same trial with and without
// recomputation; experiments_schedules.cpp: ch06/schedules, the trial under 1F1B, interleaved
// and ZB-H1; experiments_tensor.cpp: ch06/tensor_parallel).
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace concurdl::mp::detail
