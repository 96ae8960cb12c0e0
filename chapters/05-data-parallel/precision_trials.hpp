// What chapter 05's two mixed-precision experiments share (experiments_precision.cpp defines
// it; experiments_precision_accuracy.cpp uses it too): the rows of a batch, the precision axis
// and its parameter.
#pragma once

#include <cstddef>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/nn/precision.hpp"

namespace concurdl::dp::precision_trials {

inline constexpr std::size_t kRows = 64;  // per rank

// The `precision` parameter (UsageError when it names no precision).
nn::Precision precision_of(const Params& p);
// fp32, bf16 and fp16.
Axis precision_axis();

}  // namespace concurdl::dp::precision_trials
