// What every data loader shares: the options, the batch it delivers, the plan of an epoch
// (shuffled order cut into batches), the step that turns raw records into a batch (read,
// check, decode uint8 -> float, normalise), and the interface the consumer (a training loop)
// sees. The loaders themselves (loaders.hpp) differ only in who runs those steps, when, and on
// which thread: that is the whole lesson.
//
//   for (loader.start_epoch(e); auto batch = loader.next_batch();) train_step(*batch);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stop_token>
#include <string_view>
#include <vector>

#include "concurdl/async_io/store.hpp"

namespace concurdl::async_io {

struct Normalization {
  float mean = 0.5f;  // of pixel / 255; Fashion-MNIST's are data::kFashionMnistMean / Std
  float std = 0.25f;
};

struct LoaderOptions {
  std::size_t batch_size = 64;
  unsigned workers = 2;   // worker threads; for the io_uring loader: reads in flight
  unsigned prefetch = 2;  // batches that may wait ready ahead of the consumer
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  Normalization norm;
  bool verify = true;  // check every record's id and CRC while decoding
};

struct Batch {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;         // position of this batch in its epoch
  std::vector<std::uint64_t> ids;  // sample ids, as the records themselves say
  std::vector<std::int32_t> labels;
  std::vector<float> features;  // size() x feature_count, (pixel / 255 - mean) / std
  std::size_t feature_count = 0;
  std::size_t size() const { return ids.size(); }
};

// One epoch: the sample order and its cut into batches.
class EpochPlan {
 public:
  EpochPlan() = default;
  EpochPlan(std::uint64_t records, const LoaderOptions& opt, std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }
  std::size_t batches() const { return batches_; }
  std::span<const std::uint64_t> batch(std::size_t b) const;

 private:
  std::uint64_t epoch_ = 0;
  std::size_t batch_size_ = 1, batches_ = 0;
  std::vector<std::uint64_t> order_;
};

// Reads and decodes batches. Thread-safe (const); each call uses its own buffers.
class BatchAssembler {
 public:
  BatchAssembler(const RecordStore& store, const LoaderOptions& opt) : store_(store), opt_(opt) {}

  // Reads the batch's records one by one (blocking, throttled) and decodes them. Returns
  // nullopt if `stop` is requested between two records (a loader being stopped need not wait
  // for a whole batch of slow reads).
  std::optional<Batch> make(const EpochPlan& plan, std::size_t b, std::stop_token stop = {}) const;

  // Decodes batch b from its records as read back to back into `raw` (the io_uring loader's
  // path). Throws data::DataError naming the shard and offset of a bad record.
  Batch decode(const EpochPlan& plan, std::size_t b, std::span<const std::byte> raw) const;

  const RecordStore& store() const { return store_; }
  const LoaderOptions& options() const { return opt_; }

 private:
  Batch empty_batch(const EpochPlan& plan, std::size_t b) const;
  void decode_one(Batch& batch, std::size_t slot, std::span<const std::byte> record,
                  std::uint64_t id) const;

  const RecordStore& store_;
  LoaderOptions opt_;
};

class Loader {
 public:
  virtual ~Loader() = default;
  // Begin epoch `epoch` (0, 1, ...): abandons an epoch in progress. Throws on bad options.
  virtual void start_epoch(std::uint64_t epoch) = 0;
  // The next batch of the epoch, or nullopt when the epoch is done. Blocks until one is ready;
  // rethrows an exception that happened while producing it (a read error, a corrupt record).
  virtual std::optional<Batch> next_batch() = 0;
  // Stop producing: background threads leave as soon as their current record is read; nothing
  // hangs, nothing leaks. next_batch() then returns nullopt. Idempotent; destructors call it.
  virtual void stop() = 0;
  virtual std::string_view name() const = 0;
};

}  // namespace concurdl::async_io
