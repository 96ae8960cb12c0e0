// The data loaders, simplest first; each is the previous with one thing changed. All deliver
// the same batches (same plan, same decode); they differ in what overlaps with what.
//   sync               the consumer reads and decodes each batch itself, when it asks: I/O and
//                      compute take turns, so an epoch costs io + compute
//   prefetch           one background thread fills a bounded queue `prefetch` batches deep
//                      (double buffering at prefetch = 2): while the consumer computes on batch
//                      b the thread reads b+1, so an epoch costs about max(io, compute)
//   workers_unordered  N threads each assemble whole batches (PyTorch's DataLoader with
//                      num_workers = N): N batches' reads overlap; delivered as they finish,
//                      so one slow batch does not hold up the others, but the order changes
//   workers_ordered    the same, delivered in plan order through a reorder buffer (PyTorch's
//                      default, in_order = True): deterministic training, at the price of
//                      waiting for the slowest batch in the window
//   uring              (loaders_uring.hpp) one thread keeps `workers` record reads in flight with
//                      io_uring: the concurrency of N workers without N threads
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "concurdl/async_io/channel.hpp"
#include "concurdl/async_io/loader.hpp"
#include "concurdl/async_io/uring.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/core/variants.hpp"

namespace concurdl::async_io {

// v1: no concurrency. The reference every other loader must match batch for batch.
class SyncLoader final : public Loader {
 public:
  SyncLoader(const RecordStore& store, LoaderOptions opt);
  void start_epoch(std::uint64_t epoch) override;
  std::optional<Batch> next_batch() override;
  void stop() override { stopped_ = true; }
  std::string_view name() const override { return "sync"; }

 private:
  BatchAssembler assembler_;
  EpochPlan plan_;
  std::size_t next_ = 0;
  bool started_ = false, stopped_ = false;
};

// v2: one producer thread, a bounded queue of `prefetch` batches.
class PrefetchLoader final : public Loader {
 public:
  PrefetchLoader(const RecordStore& store, LoaderOptions opt);
  ~PrefetchLoader() override { stop(); }
  void start_epoch(std::uint64_t epoch) override;
  std::optional<Batch> next_batch() override;
  void stop() override;
  std::string_view name() const override { return "prefetch"; }

 private:
  BatchAssembler assembler_;
  EpochPlan plan_;
  std::unique_ptr<BoundedQueue<Batch>> queue_;
  std::jthread producer_;
};

// v3/v4: N worker threads take batch numbers from a shared counter, assemble whole batches and
// put them into the channel: BoundedQueue (unordered) or ReorderBuffer (ordered). Channel is a
// template parameter so that exercise 3.3's reorder buffer plugs into the same loader.
template <class Channel>
class WorkerLoader final : public Loader {
 public:
  WorkerLoader(const RecordStore& store, LoaderOptions opt, std::string_view name)
      : assembler_(store, opt), name_(name) {
    if (opt.workers == 0) throw std::invalid_argument("WorkerLoader: workers must be >= 1");
    if (opt.prefetch == 0) throw std::invalid_argument("WorkerLoader: prefetch must be >= 1");
  }
  ~WorkerLoader() override { stop(); }

  void start_epoch(std::uint64_t epoch) override {
    stop();
    const LoaderOptions& opt = assembler_.options();
    plan_ = EpochPlan(assembler_.store().size(), opt, epoch);
    // Up to `prefetch` batches per worker may wait ready (PyTorch's prefetch_factor), plus one
    // in each worker's hands: memory stays bounded however slow the consumer is.
    channel_ = std::make_unique<Channel>(std::size_t{opt.workers} * opt.prefetch);
    next_.store(0);
    active_.store(opt.workers);
    workers_.reserve(opt.workers);
    for (unsigned w = 0; w < opt.workers; ++w)
      workers_.emplace_back([this, w](std::stop_token st) {
        trace::set_track("loader worker " + std::to_string(w));  // its row of a --trace timeline
        work(st);
      });
  }

  std::optional<Batch> next_batch() override {
    if (!channel_) return std::nullopt;
    return channel_->take();
  }

  void stop() override {
    for (auto& w : workers_) w.request_stop();
    if (channel_) channel_->close();
    workers_.clear();  // joins: each worker leaves after at most one record read
  }

  std::string_view name() const override { return name_; }

 private:
  void work(std::stop_token st) {
    try {
      while (!st.stop_requested()) {
        const std::size_t b = next_.fetch_add(1);
        if (b >= plan_.batches()) break;
        std::optional<Batch> batch = assembler_.make(plan_, b, st);
        if (!batch || !channel_->put(b, std::move(*batch))) break;
      }
    } catch (...) {
      channel_->fail(std::current_exception());
    }
    if (active_.fetch_sub(1) == 1) channel_->finish();  // the last worker out says "done"
  }

  BatchAssembler assembler_;
  std::string_view name_;
  EpochPlan plan_;
  std::unique_ptr<Channel> channel_;
  std::atomic<std::size_t> next_{0};
  std::atomic<unsigned> active_{0};
  std::vector<std::jthread> workers_;
};

using UnorderedWorkerLoader = WorkerLoader<BoundedQueue<Batch>>;
using OrderedWorkerLoader = WorkerLoader<ReorderBuffer<Batch>>;

// The loader table: experiments, tests and the README iterate over it. Its parameter is
// "loader".
struct LoaderKind : VariantInfo {
  bool ordered;       // delivers batches in plan order
  bool uses_workers;  // LoaderOptions::workers means something (threads, or reads in flight)
  std::unique_ptr<Loader> (*make)(const RecordStore& store, const LoaderOptions& opt);
};

// Simplest first; uring needs Capability::uring (without liburing its `make` throws, and the
// harness never offers it).
const VariantTable<LoaderKind>& loader_kinds();

}  // namespace concurdl::async_io
