// The io_uring loader: one thread, many reads in flight. Where the worker loaders buy
// concurrency with threads (each blocked in one read at a time), this loader submits up to
// `workers` record reads at once into batch buffers registered with the ring (READ_FIXED),
// reaps completions as they come, and decodes a batch as soon as its last record is in. Slow
// storage is simulated without blocking: each read is paired with an io_uring timeout at the
// throttle's completion time, and a record counts as read when both have completed.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "concurdl/async_io/channel.hpp"
#include "concurdl/async_io/loader.hpp"

namespace concurdl::async_io {

// A UringLoader; without liburing, throws std::runtime_error saying so (the loader table's
// `uring` row, which the harness offers only where io_uring works).
std::unique_ptr<Loader> make_uring_loader(const RecordStore& store, const LoaderOptions& opt);

#if CONCURDL_HAVE_URING

class UringLoader final : public Loader {
 public:
  // Needs a store read through the page cache (ReadMode::pread): record-sized reads at record
  // offsets are not O_DIRECT-aligned, and mmap has nothing to submit. Throws std::runtime_error
  // when io_uring is unavailable here (uring_available says why).
  UringLoader(const RecordStore& store, LoaderOptions opt);
  ~UringLoader() override { stop(); }
  void start_epoch(std::uint64_t epoch) override;
  std::optional<Batch> next_batch() override;
  void stop() override;
  std::string_view name() const override { return "uring"; }
  bool fixed_buffers() const { return fixed_; }  // false if registration was refused

 private:
  void run(std::stop_token st);
  void loop(std::stop_token st);

  BatchAssembler assembler_;
  EpochPlan plan_;
  std::unique_ptr<BoundedQueue<Batch>> queue_;
  std::jthread thread_;
  bool fixed_ = true;
};

#endif

}  // namespace concurdl::async_io
