// Exercise 5.4 (chapter 05, exercises.md): the dynamic loss scale's update after each step. The
// reference is nn::update_loss_scale in kernels/nn/src/precision.cpp: try first, read after.
// Check it:   concurdl exercise ch05 5.4    (tests only: there is nothing here worth timing)
// or faster:  ch05_tests --gtest_filter='LossScaleEx5_4*'
#pragma once

#include "concurdl/core/errors.hpp"
#include "concurdl/nn/precision.hpp"

namespace concurdl::dp {

// Exercise 5.4: called once per training step, after the step's 16-bit gradients (scaled by
// s.scale) were checked: found_inf is true when any of them is infinite or NaN. Return whether
// the step's update may be applied, and leave in `s` the scale for the next step:
//   - an overflow: the step's gradients are useless. Skip it (return false), multiply the scale
//     by o.backoff, count the skip in s.skipped, and start counting good steps again;
//   - no overflow: apply it (return true) and count it in s.good_steps; after o.growth_interval
//     good steps in a row, multiply the scale by o.growth and start counting again.
// Never let the scale fall below 2^-24 (FP16's smallest subnormal: below it every gradient is 0).
inline bool student_update_loss_scale([[maybe_unused]] nn::LossScaleState& s,
                                      [[maybe_unused]] bool found_inf,
                                      [[maybe_unused]] const nn::LossScalerOptions& o) {
  CDL_TODO("5.4 dynamic loss scale");
}

}  // namespace concurdl::dp
