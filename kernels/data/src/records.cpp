#include "concurdl/data/records.hpp"

#include <zlib.h>

#include <cstring>
#include <limits>

namespace concurdl::data {

std::uint32_t crc32_of(std::span<const std::byte> bytes, std::uint32_t crc) {
  // zlib's crc32 takes at most UINT_MAX bytes per call.
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  uLong c = crc;
  while (left > 0) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return static_cast<std::uint32_t>(c);
}

std::uint32_t crc32_of(std::span<const std::uint8_t> bytes, std::uint32_t crc) {
  return crc32_of(std::as_bytes(bytes), crc);
}

void put_le32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_le64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint32_t get_le32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
  return v;
}
std::uint64_t get_le64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
  return v;
}

void encode_record(std::span<std::byte> out, std::uint64_t id, std::uint32_t label,
                   std::span<const std::uint8_t> payload) {
  put_le64(out.data(), id);
  put_le32(out.data() + 8, label);
  put_le32(out.data() + 12, crc32_of(payload));
  std::memcpy(out.data() + kRecordHeaderBytes, payload.data(), payload.size());
}

RecordHeader decode_record_header(std::span<const std::byte> record) {
  return {get_le64(record.data()), get_le32(record.data() + 8), get_le32(record.data() + 12)};
}

std::string check_record(std::span<const std::byte> record, std::uint64_t expected_id) {
  if (record.size() < kRecordHeaderBytes)
    return "record of " + std::to_string(record.size()) + " bytes is shorter than its header";
  const RecordHeader h = decode_record_header(record);
  if (h.id != expected_id)
    return "record holds sample id " + std::to_string(h.id) + ", expected " +
           std::to_string(expected_id);
  const std::uint32_t crc = crc32_of(record_payload(record));
  if (crc != h.crc)
    return "CRC-32 of the payload is " + std::to_string(crc) + ", the record says " +
           std::to_string(h.crc) + " (corrupt data)";
  return "";
}

}  // namespace concurdl::data
