// Exercises 1.1 and 1.2 (chapter 01, exercises.md): a parallel sum with std::thread, and a sum
// whose threads are slowed down by false sharing. The helpers you need are in
// include/concurdl/threads/reduction.hpp (chunk_bounds, sum_chunk, element, fork_join); the
// reference solutions are there too (v7_local_sums, v3_padded_partials): try first, read after.
// Check them:  concurdl exercise ch01        (tests, then a timing against the reference)
// or faster:   ch01_tests --gtest_filter='ReductionEx1_1/*:ReductionEx1_2/*'
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <thread>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/threads/reduction.hpp"

namespace concurdl::threads {

// Exercise 1.1: parallel sum with std::thread.
// Return Σ element(x[i]) in double using `threads` threads (threads >= 1), like every variant in
// kSumVariants. Fork: split x into `threads` chunks with chunk_bounds(x.size(), threads, t) and
// start one std::thread (or std::jthread) per chunk; each sums its chunk with
// sum_chunk(piece, kind) into a variable of its own. Join: wait for all of them, then add the
// partial sums. It must work for any n, including 0 and n < threads (some chunks are empty).
// Write the fork and the join yourself (fork_join in reduction.hpp is the answer, so not that).
// Think about: where does each thread put its result, and who may read it when?
inline double student_thread_sum([[maybe_unused]] std::span<const float> x,
                                 [[maybe_unused]] unsigned threads, [[maybe_unused]] SumKind kind) {
  CDL_TODO("1.1 parallel sum with std::thread");
}

// Exercise 1.2: fix the false sharing.
// The code below is v2_adjacent_partials: each thread adds every element into its own slot of
// `partial`, in memory. It is correct, and with two or more threads it is slow, because the
// slots are 8 bytes apart and several of them share one 64-byte cache line, which the cores
// keep taking away from each other to write it. Make it fast WITHOUT changing the algorithm: each
// thread must still update its slot in memory on every element (keep the atomic_ref loop; it
// stops the compiler from keeping the sum in a register). Delete the CDL_TODO line first; the
// tests will pass at once, and `concurdl exercise ch01` will show how much slower than the
// reference (v3_padded_partials) you still are. Hint: sizeof and alignof of StudentSlot.
struct StudentSlot {
  double value = 0.0;
};

template <SumKind K>
double student_partials_sum(std::span<const float> x, unsigned threads) {
  std::vector<StudentSlot> partial(threads);
  fork_join(threads, [&](unsigned t) {
    const auto range = chunk_bounds(x.size(), threads, t);
    std::atomic_ref<double> slot(partial[t].value);
    for (std::size_t i = range.first; i < range.second; ++i)
      slot.store(slot.load(std::memory_order_relaxed) + element<K>(x[i]),
                 std::memory_order_relaxed);
  });
  double s = 0;
  for (const auto& p : partial) s += p.value;
  return s;
}

inline double student_padded_sum(std::span<const float> x, unsigned threads, SumKind kind) {
  CDL_TODO("1.2 fix the false sharing");
  return kind == SumKind::memory_bound ? student_partials_sum<SumKind::memory_bound>(x, threads)
                                       : student_partials_sum<SumKind::compute_bound>(x, threads);
}

}  // namespace concurdl::threads
