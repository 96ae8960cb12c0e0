#include "concurdl/async_io/loaders.hpp"

#include <stdexcept>

#include "concurdl/async_io/loaders_uring.hpp"

namespace concurdl::async_io {

SyncLoader::SyncLoader(const RecordStore& store, LoaderOptions opt) : assembler_(store, opt) {}

void SyncLoader::start_epoch(std::uint64_t epoch) {
  plan_ = EpochPlan(assembler_.store().size(), assembler_.options(), epoch);
  next_ = 0;
  started_ = true;
  stopped_ = false;
}

std::optional<Batch> SyncLoader::next_batch() {
  if (!started_ || stopped_ || next_ >= plan_.batches()) return std::nullopt;
  return assembler_.make(plan_, next_++);
}

PrefetchLoader::PrefetchLoader(const RecordStore& store, LoaderOptions opt)
    : assembler_(store, opt) {
  if (opt.prefetch == 0) throw std::invalid_argument("PrefetchLoader: prefetch must be >= 1");
}

void PrefetchLoader::start_epoch(std::uint64_t epoch) {
  stop();
  plan_ = EpochPlan(assembler_.store().size(), assembler_.options(), epoch);
  queue_ = std::make_unique<BoundedQueue<Batch>>(assembler_.options().prefetch);
  producer_ = std::jthread([this](std::stop_token st) {
    trace::set_track("loader");
    try {
      for (std::size_t b = 0; b < plan_.batches(); ++b) {
        std::optional<Batch> batch = assembler_.make(plan_, b, st);
        // put() blocks while the queue is full: the producer runs at most `prefetch` ahead.
        if (!batch || !queue_->put(b, std::move(*batch))) return;
      }
      queue_->finish();
    } catch (...) {
      queue_->fail(std::current_exception());
    }
  });
}

std::optional<Batch> PrefetchLoader::next_batch() {
  if (!queue_) return std::nullopt;
  return queue_->take();
}

void PrefetchLoader::stop() {
  producer_.request_stop();
  if (queue_) queue_->close();
  if (producer_.joinable()) producer_.join();
}

namespace {

template <class L>
std::unique_ptr<Loader> make(const RecordStore& store, const LoaderOptions& opt) {
  return std::make_unique<L>(store, opt);
}

constexpr LoaderKind kLoaderRows[] = {
    {{"sync", "no concurrency: read and decode a batch when asked; epoch = io + compute"},
     true,
     false,
     make<SyncLoader>},
    {{"prefetch",
      "one producer thread, a bounded queue `prefetch` deep: batch b+1 is read while b is "
      "computed on; epoch ~ max(io, compute)"},
     true,
     false,
     make<PrefetchLoader>},
    {{"workers_unordered",
      "N producer threads, whole batches each: N batches' reads overlap; delivered as they finish"},
     false,
     true,
     [](const RecordStore& s, const LoaderOptions& o) -> std::unique_ptr<Loader> {
       return std::make_unique<UnorderedWorkerLoader>(s, o, "workers_unordered");
     }},
    {{"workers_ordered",
      "the same, delivered in plan order through a reorder buffer: deterministic, but a slow "
      "batch holds up the ones behind it"},
     true,
     true,
     [](const RecordStore& s, const LoaderOptions& o) -> std::unique_ptr<Loader> {
       return std::make_unique<OrderedWorkerLoader>(s, o, "workers_ordered");
     }},
    {{"uring",
      "one thread, `workers` record reads in flight through io_uring (registered buffers, "
      "timeouts as simulated latency): N-way concurrency without N threads",
      Capability::uring},
     true,
     true,
     make_uring_loader},
};

}  // namespace

const VariantTable<LoaderKind>& loader_kinds() {
  static constexpr VariantTable table{kLoaderRows, "loader"};
  return table;
}

}  // namespace concurdl::async_io
