// RecordStore: a sharded data set (kernels/data) opened for random access by sample id, read
// one of three ways, behind an optional Throttle (simulated slow storage). This is what the
// loaders read from; its read() is the blocking "fetch sample i" of a map-style data set
// (PyTorch's Dataset.__getitem__).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/async_io/throttle.hpp"
#include "concurdl/data/shards.hpp"

namespace concurdl::async_io {

enum class ReadMode {
  pread,   // a pread per record through the page cache
  mmap,    // every shard mapped once; a record is a memcpy out of the mapping
  direct,  // O_DIRECT: the aligned pages around the record into a bounce buffer, then a copy
};
std::string_view to_string(ReadMode m);
ReadMode parse_read_mode(std::string_view s);  // throws std::invalid_argument

struct StoreOptions {
  ReadMode mode = ReadMode::pread;
  StorageModel storage;  // latency and bandwidth per request; inactive by default
};

// Thrown when ReadMode::direct is asked for on a file system that refuses O_DIRECT.
class DirectIoUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RecordStore {
 public:
  explicit RecordStore(const std::filesystem::path& dir, StoreOptions opt = {});
  ~RecordStore();
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;

  std::uint64_t size() const { return ds_.size(); }
  std::uint32_t record_size() const { return ds_.record_size(); }
  const data::ShardedDataset& dataset() const { return ds_; }
  ReadMode mode() const { return opt_.mode; }
  Throttle& throttle() const { return throttle_; }

  // Blocking read of record `id` into out (record_size() bytes), then a sleep until the
  // throttle's completion time. Thread-safe. Errors name the shard file and the offset.
  void read(std::uint64_t id, std::span<std::byte> out) const;

  // "DIR/shard-00002.cdls", byte offset: where record `id` lives (for error messages).
  std::string shard_path(std::uint64_t id) const;
  std::uint64_t offset(std::uint64_t id) const { return ds_.locate(id).offset; }

  // Records requested so far (read() counts itself; asynchronous readers count theirs with
  // count_reads): tests use it to check that a loader reads only a bounded distance ahead.
  std::uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }
  void count_reads(std::uint64_t n) const { reads_.fetch_add(n, std::memory_order_relaxed); }

 private:
  StoreOptions opt_;
  data::ShardedDataset ds_;
  std::vector<std::pair<const std::byte*, std::size_t>> maps_;  // ReadMode::mmap
  mutable Throttle throttle_;
  mutable std::atomic<std::uint64_t> reads_{0};
};

}  // namespace concurdl::async_io
