// Exercise 5.1 (chapter 05, exercises.md): the ring all-reduce, over the communicator's
// point-to-point calls. The reference is allreduce_ring in src/algorithms.cpp: try first, read
// after.
// Check it:   concurdl exercise ch05        (tests, then a timing against v4_ring)
// or faster:  ch05_tests --gtest_filter='Ring/RingEx5_1.*/student_*'
#pragma once

#include <span>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

// Exercise 5.1: ring all-reduce.
// out = the sum over every rank of `in` (each rank's `in` has the same size); `in` may be `out`
// (in place); out of place, `in` must come back unchanged. n = comm.size() ranks, rank
// r = comm.rank(); your right neighbour is (r + 1) % n, your left one (r - 1 + n) % n.
// Split the vector into n blocks with block_of(count, n, i) (sizes that do not divide by n give
// the first count % n blocks one float more). Then:
//   1. reduce-scatter, n - 1 steps: in step s send block (r - s) mod n to the right, receive
//      block (r - s - 1) mod n from the left and add it to yours. Afterwards block (r + 1) mod n
//      holds the full sum (check this on paper for n = 3 before you write code).
//   2. all-gather, n - 1 steps: in step s send block (r - s + 1) mod n, the one you completed
//      last, to the right, and receive block (r - s) mod n from the left straight into place.
// Every rank sends and receives in every step: a blocking send before a blocking receive can
// deadlock on a backend whose send waits for the receiver (MPI with large messages). Use
// comm.sendrecv, or irecv first and then send. Use opts.tag for every message.
// It must work for any count (0, 1, fewer floats than ranks) and for n = 1.
// Faster: comm.irecv_reduce(left, acc, scratch, tag) receives and adds in one call, and on the
// threads backend adds straight from the sender's buffer (no copy through scratch memory);
// segments of ring_segment_floats(block, opts) floats (opts.segment_floats, or chosen from the
// block when it is kAutoSegment) let a block go on to the next rank while the rest arrives.
inline void student_allreduce_ring([[maybe_unused]] Communicator& comm,
                                   [[maybe_unused]] std::span<const float> in,
                                   [[maybe_unused]] std::span<float> out,
                                   [[maybe_unused]] const AlgoOptions& opts = {}) {
  CDL_TODO("5.1 ring all-reduce");
}

}  // namespace concurdl::dp
