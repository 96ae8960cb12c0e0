// The sharded record format: a data set as a directory of shard files plus an index, the way
// large training sets are stored (TFRecord shards, WebDataset tars, MosaicML MDS), simplified to
// fixed-size records (records.hpp) so that any sample is one computed-offset read away.
//
//   DIR/index.cdlx         "CDLINDEX" | u32 version (1) | u32 record_size | u64 total records |
//                          u32 shard count | u32 0 | per shard: u64 first id, u64 record count,
//                          char name[48] | u32 CRC-32 of everything before it
//   DIR/shard-00000.cdls   header (4096 bytes): "CDLSHARD" | u32 version (1) | u32 header bytes
//                          (4096) | u32 record_size | u32 0 | u64 record count | u64 first id |
//                          u32 CRC-32 of the 40 bytes before it | zeros
//                          then the records, back to back from byte 4096: the data starts on a
//                          4096-byte boundary, so O_DIRECT reads of whole pages line up with it.
// All integers little-endian. Readers check every field; a bad one is a DataError (error.hpp)
// naming the file and the byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "concurdl/data/error.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/data/records.hpp"

namespace concurdl::data {

inline constexpr std::uint32_t kShardFormatVersion = 1;
inline constexpr std::uint32_t kShardHeaderBytes = 4096;
inline constexpr std::size_t kShardNameBytes = 48;
inline constexpr const char* kIndexFileName = "index.cdlx";

struct ShardInfo {
  std::filesystem::path path;
  std::uint64_t first_id = 0;
  std::uint64_t count = 0;
};

struct DatasetInfo {
  std::filesystem::path dir;
  std::uint32_t record_size = 0;
  std::uint64_t records = 0;
  std::vector<ShardInfo> shards;

  std::uint32_t payload_bytes() const {
    return record_size - static_cast<std::uint32_t>(kRecordHeaderBytes);
  }
  std::uint64_t data_bytes() const { return records * record_size; }
};

// Where record `id` lives: which shard, and its byte offset in that shard's file.
struct RecordLocation {
  std::size_t shard = 0;
  std::uint64_t offset = 0;
};
RecordLocation locate(const DatasetInfo& info, std::uint64_t id);

// Writes a data set record by record (ids 0, 1, 2, ... in order of append) into shards of
// `records_per_shard` records. finish() writes the shard headers and, last, the index, each
// fsync'ed: a data set without its index was not finished, and read_index rejects it.
class ShardWriter {
 public:
  ShardWriter(std::filesystem::path dir, std::uint32_t record_size,
              std::uint64_t records_per_shard);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append(std::uint32_t label, std::span<const std::uint8_t> payload);
  DatasetInfo finish();

 private:
  void open_next_shard();
  void close_shard();

  std::filesystem::path dir_;
  std::uint32_t record_size_;
  std::uint64_t per_shard_;
  std::uint64_t written_ = 0;
  DatasetInfo info_;
  UniqueFd shard_;
  std::vector<std::byte> buffer_;  // records not yet written to the current shard
  bool finished_ = false;
};

// Reads and checks the index and every shard's header and length (not the records).
DatasetInfo read_index(const std::filesystem::path& dir);

// Reads every record and checks its id and CRC: the full integrity check (reads all the data).
void verify_records(const DatasetInfo& info);

// Fashion-MNIST (or any IDX pair) as shards: record = header + the image's pixels.
DatasetInfo write_labelled_images(const std::filesystem::path& dir, const LabelledImages& data,
                                  std::uint64_t records_per_shard);

// A data set opened for reading: one descriptor per shard. `extra_flags` are added to
// O_RDONLY | O_CLOEXEC (O_DIRECT, for instance); opening fails with std::system_error.
class ShardedDataset {
 public:
  explicit ShardedDataset(const std::filesystem::path& dir, int extra_flags = 0);
  ShardedDataset(DatasetInfo info, int extra_flags);

  const DatasetInfo& info() const { return info_; }
  std::uint64_t size() const { return info_.records; }
  std::uint32_t record_size() const { return info_.record_size; }
  std::size_t shards() const { return info_.shards.size(); }
  int fd(std::size_t shard) const { return fds_[shard].get(); }
  const std::filesystem::path& shard_path(std::size_t shard) const {
    return info_.shards[shard].path;
  }
  RecordLocation locate(std::uint64_t id) const { return data::locate(info_, id); }

 private:
  DatasetInfo info_;
  std::vector<UniqueFd> fds_;
};

}  // namespace concurdl::data
