// Synthetic data sets of any size and record size, deterministic from a seed: the same spec
// gives the same bytes on every machine (splitmix64, no <random> distributions, whose output
// differs between standard libraries). Each class has a prototype pattern in the top two bits of
// every byte and per-sample noise in the rest, so a model could learn it and a check can
// recompute any sample from its id alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "concurdl/data/records.hpp"
#include "concurdl/data/shards.hpp"

namespace concurdl::data {

// One step of splitmix64 (Steele, Lea, Flood 2014): a fast, well-mixed 64-bit stream.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct SyntheticSpec {
  std::uint64_t records = 1024;
  std::uint32_t payload_bytes = 784;
  std::uint32_t classes = 10;
  std::uint64_t seed = 1;

  std::uint32_t record_size() const {
    return payload_bytes + static_cast<std::uint32_t>(kRecordHeaderBytes);
  }
};

std::uint32_t synthetic_label(const SyntheticSpec& spec, std::uint64_t id);
void synthetic_payload(const SyntheticSpec& spec, std::uint64_t id, std::span<std::uint8_t> out);
// The whole record, as write_synthetic_dataset stores it; out.size() == spec.record_size().
void synthetic_record(const SyntheticSpec& spec, std::uint64_t id, std::span<std::byte> out);

DatasetInfo write_synthetic_dataset(const std::filesystem::path& dir, const SyntheticSpec& spec,
                                    std::uint64_t records_per_shard);

// Pseudo-random bytes for raw read experiments: fill_random(out, seed, offset) writes the bytes
// at [offset, offset + out.size()) of the stream for `seed` (offset a multiple of 8).
void fill_random(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset = 0);
// Writes a file of `bytes` such bytes (fsync'ed) and returns their CRC-32.
std::uint32_t write_random_file(const std::filesystem::path& path, std::uint64_t bytes,
                                std::uint64_t seed);

}  // namespace concurdl::data
