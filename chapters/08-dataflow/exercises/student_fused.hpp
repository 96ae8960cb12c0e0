// Exercise 8.2 (chapter 08, exercises.md): a fused element-wise kernel. The reference is
// apply_chain in src/fusion.cpp: try first, read after.
// Check it:  concurdl exercise ch08 8.2     (tests, then a timing against the reference)
// or faster: ch08_tests --gtest_filter='FusedEx8_2/student.*'
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "concurdl/core/errors.hpp"
#include "concurdl/df/graph.hpp"

namespace concurdl::df {

// Exercise 8.2: out[i] = the chain applied to in[i], for i in [0, n), in ONE pass over memory:
// each element read once and written once, whatever the chain's length k. The chain's ops are
// unary element-wise, applied in order: Op::relu (max(x, 0)), Op::scale (alpha x), Op::shift
// (x + alpha), Op::square (x x), each with its alpha (the pair's float). An empty chain copies.
// in and out may be the same array (in place); otherwise they do not overlap. n may be 0.
//
// Every element must be exactly what applying the ops one at a time in float gives (the tests
// compare bits): same ops, same order, no reassociation (no -ffast-math style rewriting).
//
// Hints: k passes of apply_op (src/fusion.cpp) are correct and move k times the bytes: the
// timing (k = 8 over 4M floats) calls that CORRECT BUT SLOW (3.1x the reference's time on a
// Zen 4 guest). A block of a few thousand floats that stays in L1, run through the chain op by
// op, makes one pass over memory, but each op still loads and stores every element from L1: at
// k = 8 that was CORRECT BUT SLOW too (2.4x). A loop over elements with a switch per op per
// element keeps the element in a register but does not vectorise. What is left: a few vector
// registers' worth of elements (GCC's vector types, float __attribute__((vector_size(32))),
// or a small array the compiler keeps in registers), the whole chain applied to them, stored.
// Think about: the bytes each version moves per element (the bytes model of ch08/fusion) and
// when a fused pass stops being memory-bound (what the chart shows past k = 4 or so).
inline void student_apply_chain([[maybe_unused]] std::span<const std::pair<Op, float>> chain,
                                [[maybe_unused]] const float* in, [[maybe_unused]] float* out,
                                [[maybe_unused]] std::size_t n) {
  CDL_TODO("8.2 fused element-wise kernel");
}

}  // namespace concurdl::df
