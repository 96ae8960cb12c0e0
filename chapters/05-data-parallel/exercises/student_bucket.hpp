// Exercise 5.2 (chapter 05, exercises.md): bucketed gradient all-reduce, overlapped with backward.
// The reference is OverlapSync in include/concurdl/dp/data_parallel.hpp and
// src/data_parallel.cpp: try first, read after.
// Check it:  concurdl exercise ch05        (tests, then a timing against the reference)
// or faster: ch05_tests --gtest_filter='DdpEx5_2*'
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/data_parallel.hpp"

namespace concurdl::dp {

// Exercise 5.2: a GradientSync that starts each bucket's all-reduce as soon as backward has
// finished every layer in it, while backward goes on with the layers below, and waits for all
// of them in finish_step().
//
// What you have (GradientSync, data_parallel.hpp):
//   buckets()        the plan, in the order backward finishes them: bucket 0 holds the last
//                    layers; each bucket is layers [first_layer, last_layer)
//   bucket_of(l)     which bucket layer l is in
//   reduce(bucket)   all-reduces that bucket's gradients in place, over every rank; every rank
//                    must reduce the same buckets in the same order. It blocks until done.
// What the trainer calls, on its compute thread, every step:
//   begin_step()     before forward
//   layer_done(l)    for l = layers-1 down to 0, from inside backward, as each layer's
//                    gradient becomes final (backward_layers' on_layer_done hook)
//   finish_step()    after backward: return only when every bucket has been reduced; if a
//                    reduce failed (another rank died), rethrow its exception here
// Calling reduce() inside layer_done() would be correct but would block backward: no overlap.
// Run the reduces on a thread of your own, started once (in the constructor) and stopped and
// joined in the destructor, even when a step was abandoned halfway by an exception.
// Think about: what tells the thread there is work, what tells finish_step it is all done, and
// what happens to an exception thrown on that thread.
class StudentBucketSync final : public GradientSync {
 public:
  StudentBucketSync(Communicator& comm, std::span<float> gradients,
                    std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
                    AllReduceFn algorithm, AlgoOptions algo = {})
      : GradientSync(comm, gradients, std::move(layer_offsets), bucket_bytes, algorithm, algo) {
    CDL_TODO("5.2 bucketed all-reduce with overlap");
  }

  void begin_step() override {}
  void layer_done([[maybe_unused]] std::size_t layer) override {}
  void finish_step() override {}
};

}  // namespace concurdl::dp
