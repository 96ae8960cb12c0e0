// Exercise 6.3 (chapter 06, exercises.md): the ZB-H1 pipeline schedule's order of operations.
// The reference is stage_order(Schedule::zb_h1, ...) in include/concurdl/mp/pipeline.hpp and
// src/pipeline.cpp: try first, read after.
// Check it:  concurdl exercise ch06 6.3     (tests, then a timing against the reference)
// or faster: ch06_tests --gtest_filter='ZeroBubbleEx6_3/student.*'
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/mp/pipeline.hpp"

namespace concurdl::mp {

// Exercise 6.3: the order in which stage `stage` of `stages` (0 <= stage < stages) runs its
// operations under ZB-H1, the first of the zero-bubble schedules (Qi, Wan, Huang, Lin, "Zero
// Bubble Pipeline Parallelism", ICLR 2024, arXiv:2401.10241). Each backward is split in two:
//
//   B  the gradient with respect to the stage's input: the stage below waits for it;
//   W  the gradient with respect to the stage's weights: nothing waits for it, and it may run
//      any time after its B (Mlp::backward_input_layers and backward_weight_layers).
//
// ZB-H1 keeps 1F1B's order of F and B (exercise 6.2: a warm-up of p - s - 1 forwards, then one
// forward and one backward in turn, then the remaining backwards) and places micro-batch i's W
// right after the B of micro-batch i + s: stage s defers its W's by s, and runs the s it has
// left after its last B. The last stage, whose bubble comes at the step's end, fills it with
// its deferred W's; stage 0 defers none. Every stage then holds at most min(m, p) micro-batches
// in flight (from F to W), which is 1F1B's largest.
//
//   p = 2, m = 3:  stage 0  F0 F1 B0 W0 F2 B1 W1 B2 W2
//                  stage 1  F0 B0 F1 B1 W0 F2 B2 W1 W2
//
// Return the 3 m operations of this stage as PipeOp {OpKind::forward / backward / weight,
// micro-batch, chunk 0}. Work out p = 4, m = 6 on paper first: after which B does stage 2 run
// its W0, and how many W's are left after its last B?
// Think about: why deferring the W's shrinks the bubble at all (what does stage s - 1 wait for
// under 1F1B that it no longer waits for?); why the deferral is s and not p - s - 1; what a
// deferred W keeps alive until it runs (see the lesson's "Memory").
inline std::vector<PipeOp> student_zb_h1_order([[maybe_unused]] int stage,
                                               [[maybe_unused]] int stages,
                                               [[maybe_unused]] std::size_t micro_batches) {
  CDL_TODO("6.3 ZB-H1 order");
}

}  // namespace concurdl::mp
