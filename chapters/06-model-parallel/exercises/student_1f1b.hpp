// Exercise 6.2 (chapter 06, exercises.md): the 1F1B pipeline schedule's order of operations.
// The reference is stage_order(Schedule::one_f_one_b, ...) in include/concurdl/mp/pipeline.hpp
// and src/pipeline.cpp: try first, read after.
// Check it:  concurdl exercise ch06 6.2     (tests, then a timing against the reference)
// or faster: ch06_tests --gtest_filter='OneFOneBEx6_2/student.*'
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "concurdl/core/errors.hpp"

namespace concurdl::mp {

// Exercise 6.2: the order in which stage `stage` of `stages` (0 <= stage < stages) runs the
// forwards and backwards of `micro_batches` micro-batches under 1F1B, the "one forward, one
// backward" schedule of PipeDream (Narayanan et al., SOSP 2019) in its flushed form,
// PipeDream-Flush (Narayanan et al., ICML 2021, arXiv:2006.09503), Megatron-LM's default
// (Narayanan et al., SC21, arXiv:2104.04473). The encoding
// is stage_order's: +1 + i is the forward (F) of micro-batch i, -1 - i its backward (B).
// Micro-batches go through every stage in order 0, 1, 2, ..., forwards and backwards alike.
//
//   GPipe    F0 F1 ... Fm-1, then every B: the stage holds all m micro-batches' activations
//            (Huang et al., NeurIPS 2019, arXiv:1811.06965).
//   1F1B     a warm-up of forwards, so that the stages below the last have work while the first
//            micro-batch travels down and its gradient comes back; then, in the steady state,
//            one forward and one backward in turn; then the backwards that remain (cool-down).
//            A micro-batch's activations live from its F to its B, and 1F1B keeps at most
//            min(m, stages - stage) of them on stage `stage`: the last stage one at a time.
//
//   p = 2 stages, m = 4, one time slot per F or B, free messages ("..": the stage waits):
//   slot     0  1  2  3  4  5  6  7  8  9
//   stage 0  F0 F1 .. B0 F2 B1 F3 B2 .. B3   p - 1 = 1 warm-up forward, then F and B in turn
//   stage 1  .. F0 B0 F1 B1 F2 B2 F3 B3 ..   the last stage: no warm-up, one slot behind
//   so stage 0's order is {1, 2, -1, 3, -2, 4, -3, -4}, stage 1's {1, -1, 2, -2, 3, -3, 4, -4}.
//
// Return the 2 m operations of this stage: every micro-batch's F once, then later its B once
// (check_order in pipeline.hpp says whether an order is one). Work it out on paper for p = 4,
// m = 6 before you write code: how many forwards does stage s run before its first backward,
// and what if m is smaller than that?
// Think about: why the warm-up is exactly as long as it is (what does stage s wait for before
// it can run B0?); why the order of one stage must be one the other stages' orders can meet
// (what happens if stage 0 runs B0 before F1 while stage 1 ...?); why 1F1B's bubble is the
// same as GPipe's although it holds fewer activations.
inline std::vector<int> student_1f1b_order([[maybe_unused]] int stage, [[maybe_unused]] int stages,
                                           [[maybe_unused]] std::size_t micro_batches) {
  CDL_TODO("6.2 1F1B order");
}

}  // namespace concurdl::mp
