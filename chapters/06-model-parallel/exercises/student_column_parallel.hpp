// Exercise 6.1 (chapter 06, exercises.md): a column-parallel Linear layer's forward and backward,
// on chapter 05's communicator. The reference is ColumnParallelLinear in
// include/concurdl/mp/tensor_parallel.hpp and src/tensor_parallel.cpp: try first, read after.
// Check it:  concurdl exercise ch06 6.1     (tests, then a timing against the reference)
// or faster: ch06_tests --gtest_filter='ColumnLinearEx6_1/student.*'
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/mp/tensor_parallel.hpp"

namespace concurdl::mp {

// Exercise 6.1: Megatron's column-parallel Linear (Shoeybi et al., 2019). The full layer maps
// `in` input features to `out` output features: y = x W^T + b, W out x in, row-major as nn::Mlp
// keeps it. Its rows (the output features) are split over the p = comm.size() ranks: rank r
// holds `shard`, a contiguous block of out / p rows of W and the same block of b, built by
// column_shard(). Every rank gets the whole input x (batch x shard.in, the same on every rank)
// and computes its own out / p columns of y. Every rank calls both functions, in the same order.
//
//   student_column_forward   y_local (batch x shard.out) = x W_r^T + b_r. No communication.
//   student_column_backward  dy_local (batch x shard.out) is this rank's columns of dL/dy.
//                            Writes (overwrites, never adds to) the shard's gradients:
//                              shard.dw (shard.out x shard.in) = dy_local^T x
//                              shard.db (shard.out)            = the column sums of dy_local
//                            and, when dx is not null, the full input gradient (batch x
//                            shard.in) on every rank: dx = dy W = the sum over the ranks of
//                            dy_local W_r. Each rank computes its term; comm.all_reduce(span)
//                            sums them in place on every rank. dx null: no communication.
//
// Hints: kernels::gemm (kernels/cpu/include/concurdl/kernels/gemm.hpp) computes
// C = alpha op(A) op(B) + beta C, row-major, with either operand transposed and beta 0 meaning
// "C is written, never read": each of the three products above is one call. Loops are allowed
// too, and the timing will tell you what they cost: the reference uses GemmVersion::openblas.
// Work out m, n, k and the leading dimensions on paper first (W_r is shard.out x shard.in).
// Think about: why the forward needs no communication and the backward does; why dw and db need
// no all-reduce, while dx does (which input features does W_r touch?); what the all-reduce
// moves, batch x in floats, against what a data-parallel step would all-reduce for this layer.
inline void student_column_forward([[maybe_unused]] dp::Communicator& comm,
                                   [[maybe_unused]] const LinearShard& shard,
                                   [[maybe_unused]] const float* x,
                                   [[maybe_unused]] std::size_t batch,
                                   [[maybe_unused]] float* y_local) {
  CDL_TODO("6.1 column-parallel Linear");
}

inline void student_column_backward([[maybe_unused]] dp::Communicator& comm,
                                    [[maybe_unused]] LinearShard& shard,
                                    [[maybe_unused]] const float* x,
                                    [[maybe_unused]] const float* dy_local,
                                    [[maybe_unused]] std::size_t batch,
                                    [[maybe_unused]] float* dx) {
  CDL_TODO("6.1 column-parallel Linear");
}

}  // namespace concurdl::mp
