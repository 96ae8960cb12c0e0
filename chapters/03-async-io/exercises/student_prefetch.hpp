// Exercise 3.1: a prefetching loader with a bounded queue (chapter 03, exercises.md).
//
// StudentPrefetchLoader has PrefetchLoader's contract (include/concurdl/async_io/loader.hpp,
// class Loader): one producer thread reads and decodes batches 0, 1, 2, ... of the epoch and
// puts them into a queue that holds at most `prefetch` batches; next_batch() takes them out in
// order. While the consumer computes on batch b, the producer is already reading b + 1: I/O and
// compute overlap, and an epoch costs about max(io, compute) instead of io + compute.
//
// Given: the members, the assembler (assembler_.make(plan_, b, stop_token) reads and decodes
// batch b, or returns nullopt if stop was requested), and stop(). You write:
//   start_epoch(e)  stop a running epoch (call stop()), make the plan, reset the queue state,
//                   start producer_ running produce()
//   produce(st)     for each batch: make it, wait while the queue is full (and not stopping),
//                   push it, wake the consumer; at the end mark the epoch done; an exception
//                   goes into error_ for the consumer (catch (...) + std::current_exception())
//   next_batch()    wait until a batch is queued, or the epoch is done, failed or stopped; pop
//                   one and wake the producer; rethrow error_; nullopt when done or stopped
// Check it:   concurdl exercise ch03      (tests, then a timing against the reference)
// or faster:  ch03_tests --gtest_filter='LoaderTyped/student_prefetch.*'
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "concurdl/async_io/loader.hpp"
#include "concurdl/core/errors.hpp"

namespace concurdl::async_io {

class StudentPrefetchLoader final : public Loader {
 public:
  StudentPrefetchLoader(const RecordStore& store, LoaderOptions opt) : assembler_(store, opt) {}
  ~StudentPrefetchLoader() override { stop(); }

  void start_epoch([[maybe_unused]] std::uint64_t epoch) override {
    CDL_TODO("3.1 prefetching loader");
  }

  std::optional<Batch> next_batch() override { CDL_TODO("3.1 prefetching loader"); }

  // Given: wake everyone, make the producer leave, wait for it. Safe to call at any time.
  void stop() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    not_full_.notify_all();
    not_empty_.notify_all();
    producer_.request_stop();
    if (producer_.joinable()) producer_.join();
  }

  std::string_view name() const override { return "student_prefetch"; }

 private:
  // Runs on producer_. Hint: hold mu_ only around the queue, never while reading a batch.
  void produce([[maybe_unused]] std::stop_token st) {}

  BatchAssembler assembler_;
  EpochPlan plan_;
  std::mutex mu_;
  std::condition_variable not_full_;    // the producer waits here while the queue is full
  std::condition_variable not_empty_;   // the consumer waits here while it is empty
  std::deque<Batch> queue_;             // at most assembler_.options().prefetch batches
  [[maybe_unused]] bool done_ = false;  // the producer has put the epoch's last batch
  bool stopping_ = false;               // stop() was called
  std::exception_ptr error_;            // what went wrong on the producer, for the consumer
  std::jthread producer_;
};

}  // namespace concurdl::async_io
