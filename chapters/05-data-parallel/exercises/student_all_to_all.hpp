// Exercise 5.5 (chapter 05, exercises.md): the pairwise all-to-all with variable counts, over the
// communicator's point-to-point calls. The reference is all_to_all_v_pairwise in
// include/concurdl/dp/all_to_all.hpp and src/all_to_all.cpp: try first, read after.
// Check it:   concurdl exercise ch05 5.5    (tests, then a timing against the reference)
// or faster:  ch05_tests --gtest_filter='Pairwise/AllToAllEx5_5.*/student_*'
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

// Exercise 5.5: all-to-all with a size per pair (MPI_Alltoallv), what comm.all_to_all_v does,
// written over send/recv. n = comm.size() ranks, this one r = comm.rank().
//   send  n blocks one after the other: block j, send_counts[j] floats, goes to rank j;
//   recv  n blocks one after the other: block j, recv_counts[j] floats, is what rank j sends
//         here (recv_counts[j] is rank j's send_counts[r]: the caller has exchanged the counts).
// Counts may be zero, and differ from pair to pair. send must come back unchanged.
// Block r stays here: copy it, do not send it to yourself. Every other block crosses once, in
// the pairwise exchange's n - 1 steps (Thakur, Rabenseifner & Gropp 2005): at step s = 1 .. n - 1
// rank r sends its block for rank (r + s) mod n and receives the block of rank (r - s) mod n,
// in one comm.sendrecv (it cannot deadlock whatever the size; a blocking send before its receive
// can, where a send waits for its receiver). Check on paper for n = 3 that in every step each
// send meets the receive its partner posts in the same step. Use opts.tag for every message.
// The communicator counts the bytes you hand to send, isend and sendrecv (comm.bytes_sent()):
// the tests hold them to the model, every float for another rank sent exactly once.
inline void student_all_to_all_v([[maybe_unused]] Communicator& comm,
                                 [[maybe_unused]] std::span<const float> send,
                                 [[maybe_unused]] std::span<const std::size_t> send_counts,
                                 [[maybe_unused]] std::span<float> recv,
                                 [[maybe_unused]] std::span<const std::size_t> recv_counts,
                                 [[maybe_unused]] const AlgoOptions& opts = {}) {
  CDL_TODO("5.5 pairwise all-to-all");
}

}  // namespace concurdl::dp
