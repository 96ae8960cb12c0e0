// The record: the unit a data loader reads. Fixed size, so record i of a shard is at a computed
// offset (random access without a per-record index), and self-describing enough that a loader's
// output can be checked: a sample delivered twice, lost, or mixed up with another shows.
//   bytes [0, 8)             sample id (u64, little-endian): its position in the data set
//   bytes [8, 12)            label (u32)
//   bytes [12, 16)           CRC-32 of the payload
//   bytes [16, record_size)  payload: the sample's features, one byte each (784 pixels for
//                            Fashion-MNIST)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace concurdl::data {

inline constexpr std::size_t kRecordHeaderBytes = 16;

struct RecordHeader {
  std::uint64_t id = 0;
  std::uint32_t label = 0;
  std::uint32_t crc = 0;
};

// zlib's CRC-32 (the one gzip and PNG use).
std::uint32_t crc32_of(std::span<const std::byte> bytes, std::uint32_t crc = 0);
std::uint32_t crc32_of(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0);

// out.size() == kRecordHeaderBytes + payload.size().
void encode_record(std::span<std::byte> out, std::uint64_t id, std::uint32_t label,
                   std::span<const std::uint8_t> payload);
RecordHeader decode_record_header(std::span<const std::byte> record);
inline std::span<const std::uint8_t> record_payload(std::span<const std::byte> record) {
  return {reinterpret_cast<const std::uint8_t*>(record.data()) + kRecordHeaderBytes,
          record.size() - kRecordHeaderBytes};
}
// "" when the record carries id `expected_id` and its payload matches its CRC, else what is wrong.
std::string check_record(std::span<const std::byte> record, std::uint64_t expected_id);

// Little-endian integers in byte buffers (the file formats are little-endian on every machine).
void put_le32(std::byte* p, std::uint32_t v);
void put_le64(std::byte* p, std::uint64_t v);
std::uint32_t get_le32(const std::byte* p);
std::uint64_t get_le64(const std::byte* p);

}  // namespace concurdl::data
