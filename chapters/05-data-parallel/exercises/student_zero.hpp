// Exercise 5.3 (chapter 05, exercises.md): ZeRO stage 2's two steps on one layer, over the
// ring's halves. The reference is zero_reduce_layer / zero_update_layer in src/zero.cpp: try
// first, read after.
// Check it:   concurdl exercise ch05 5.3    (tests, then a timing against the reference)
// or faster:  ch05_tests --gtest_filter='ZeroEx5_3*'
#pragma once

#include <span>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::dp {

// Exercise 5.3, step 1: after a layer's backward. `whole` is this rank's gradient of the layer
// (every rank's has the same size); afterwards `grad_shard` must hold your block of the SUM over
// the ranks: block r of block_of(whole.size(), n, r), where n = comm.size(), r = comm.rank().
// `whole` is freed by the trainer as soon as you return (that is stage 2's saving), and you may
// use it as scratch. reduce_scatter_ring(comm, whole, opts) (algorithms.hpp) leaves the sum of
// block r in block r of `whole`, in place.
inline void student_zero_reduce_layer([[maybe_unused]] Communicator& comm,
                                      [[maybe_unused]] std::span<float> whole,
                                      [[maybe_unused]] std::span<float> grad_shard,
                                      [[maybe_unused]] const AlgoOptions& opts) {
  CDL_TODO("5.3 ZeRO-2 step");
}

// Exercise 5.3, step 2: after every layer was reduced. `params` is the layer's whole parameters
// (every rank holds them all at stage 2), `grad_shard` and `momentum` your block's summed
// gradient and momentum. Take the SGD step on your block only, with kernels::sgd_update(p, v, g,
// sgd.lr, sgd.momentum, sgd.weight_decay) for each of its floats, then bring every rank's updated
// block to every rank: all_gather_ring(comm, params, opts) expects block r in place on rank r.
// Every rank must update and gather every layer, in the same order.
inline void student_zero_update_layer([[maybe_unused]] Communicator& comm,
                                      [[maybe_unused]] std::span<float> params,
                                      [[maybe_unused]] std::span<const float> grad_shard,
                                      [[maybe_unused]] std::span<float> momentum,
                                      [[maybe_unused]] const nn::SgdOptions& sgd,
                                      [[maybe_unused]] const AlgoOptions& opts) {
  CDL_TODO("5.3 ZeRO-2 step");
}

}  // namespace concurdl::dp
