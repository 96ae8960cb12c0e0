// Exercise 6.4 (chapter 06, exercises.md): top-k dispatch with capacity, the slots of a
// mixture-of-experts layer. The reference is nn::moe_assign_slots in
// kernels/nn/include/concurdl/nn/moe.hpp and kernels/nn/src/moe.cpp: try first, read after.
// Check it:  concurdl exercise ch06 6.4     (tests only: a loop over the choices, nothing to time)
// or faster: ch06_tests --gtest_filter='MoeSlotsEx6_4/student.*'
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/nn/moe.hpp"

namespace concurdl::mp {

// Exercise 6.4: hand out the slots of one batch's choices. routes holds tokens * top_k choices,
// token-major: routes[t * top_k + c] is token t's choice c (c = 0 its first choice, c = 1 its
// second), and its `expert` (below `experts`) is set. Each expert has a buffer of `capacity`
// rows. Overwrite every route's `kept` and `slot`, and leave `expert` and `gate` alone:
//   - the order is fixed: every first choice in token order, then every second choice in token
//     order (GShard, Lepikhin et al. 2020, arXiv:2006.16668, Algorithm 1; Switch Transformers,
//     Fedus et al., arXiv:2101.03961, is the top_k = 1 case);
//   - a choice's position is the number of choices of the same expert before it in that order;
//     it is kept when the position is below `capacity` (then slot = position), and dropped
//     otherwise (kept = false; the slot of a dropped choice does not matter);
//   - return how many choices were dropped.
// Dropless is a capacity no expert can exceed (the number of tokens).
//
// The code after CDL_TODO is a starting point, and it is wrong: it hands out the slots token by
// token, a token's two choices together. Delete the CDL_TODO line and run the tests to see
// where (and exercises.md for why GShard does not do it that way); then fix it.
// Think about: where does the first second choice of expert e go in the buffer, and why does
// it depend on tokens that come after it?
inline std::size_t student_moe_assign_slots(std::span<nn::MoeRoute> routes, std::size_t top_k,
                                            std::size_t experts, std::size_t capacity) {
  CDL_TODO("6.4 top-k dispatch with capacity");
  std::vector<std::size_t> filled(experts, 0);
  std::size_t dropped = 0;
  for (std::size_t t = 0; t < routes.size() / top_k; ++t)
    for (std::size_t c = 0; c < top_k; ++c) {
      nn::MoeRoute& r = routes[t * top_k + c];
      const std::size_t position = filled[r.expert]++;
      r.kept = position < capacity;
      r.slot = r.kept ? static_cast<std::uint32_t>(position) : 0;
      if (!r.kept) ++dropped;
    }
  return dropped;
}

}  // namespace concurdl::mp
