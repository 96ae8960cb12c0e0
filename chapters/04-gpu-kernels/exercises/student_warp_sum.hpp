// Exercise 4.2 (chapter 04, exercises.md): a reduction in registers, with warp shuffles. The
// references are grid_stride_sum and warp_shuffle_sum in index.hpp: try first, read after.
// Check it:  concurdl exercise ch04 4.2     (the tests on the CPU; on a GPU, a timing too)
// or faster: ch04_tests --gtest_filter='WarpSumEx4_2/student.*'
#pragma once

#include <cstddef>

#include "concurdl/gpu/index.hpp"

namespace concurdl::gpu {

// The kernel (exercises/student_kernels.cu) sums n floats with as many threads as fill the GPU
// a few times over, in three steps, of which you write two:
//
//   float v = student_thread_sum(in, n, global_thread_index, total_threads);
//   v = student_warp_sum(warp, v);
//   if (lane == 0) atomicAdd(out, v);                  // one atomic per warp
//
// student_thread_sum: the sum of the elements thread `thread` of `threads` visits in a
// grid-stride loop: in[thread], in[thread + threads], ... below n (none when thread >= n).
// Consecutive threads must read consecutive elements (coalesced), so not a contiguous chunk
// each.
CDL_HD inline float student_thread_sum([[maybe_unused]] const float* in,
                                       [[maybe_unused]] std::size_t n,
                                       [[maybe_unused]] std::size_t thread,
                                       [[maybe_unused]] std::size_t threads) {
  CDL_HD_TODO("4.2 warp-shuffle reduction");
  return 0.0f;
}

// student_warp_sum: called by all 32 lanes of a warp at once, each with its own v; lane 0 must
// return the sum of the 32 (what the others return does not matter). warp.shfl_down(x, offset)
// returns the x that lane (this lane + offset) passed to the same call, or this lane's own x
// past lane 31 (warp.lane() is this lane's number, 0 to 31): on the GPU it is
// __shfl_down_sync(0xffffffff, x, offset); on the CPU the tests
// run 32 threads that meet at a barrier in every shfl_down (tests/warp_sim.hpp). So every lane
// must make the same shfl_down calls in the same order: a lane that skips one leaves the others
// waiting (on the GPU: undefined behaviour; in the tests: a deadlock, reported as one).
//
// Hints: log2(32) = 5 shuffles suffice. Think about: how many shared-memory accesses and
// __syncthreads() v3's tree (reduce.cu) spends on the same 32 values, and why a shuffle needs
// neither.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Warp>
CDL_HD float student_warp_sum([[maybe_unused]] Warp& warp, float v) {
  CDL_HD_TODO("4.2 warp-shuffle reduction");
  return v;
}

}  // namespace concurdl::gpu
