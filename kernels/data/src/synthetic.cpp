#include "concurdl/data/synthetic.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

namespace concurdl::data {

namespace {

// The k-th value of the splitmix64 stream started at `seed`, without running the k before it.
std::uint64_t stream_at(std::uint64_t seed, std::uint64_t k) {
  std::uint64_t state = seed + k * 0x9E3779B97F4A7C15ull;
  return splitmix64(state);
}

}  // namespace

std::uint32_t synthetic_label(const SyntheticSpec& spec, std::uint64_t id) {
  return static_cast<std::uint32_t>(stream_at(spec.seed ^ 0x5A17ull, id) %
                                    std::max<std::uint32_t>(1, spec.classes));
}

void synthetic_payload(const SyntheticSpec& spec, std::uint64_t id, std::span<std::uint8_t> out) {
  const std::uint32_t label = synthetic_label(spec, id);
  // Prototype of the class: 2 bits per byte from a stream keyed by (seed, label); noise: 6 bits
  // per byte from a stream keyed by (seed, id). 8 bytes of each per 64-bit draw.
  std::uint64_t proto_state = spec.seed * 0x2545F4914F6CDD1Dull + label;
  std::uint64_t noise_state = spec.seed ^ (id * 0xD1B54A32D192ED03ull);
  for (std::size_t j = 0; j < out.size(); j += 8) {
    const std::uint64_t proto = splitmix64(proto_state), noise = splitmix64(noise_state);
    const std::size_t n = std::min<std::size_t>(8, out.size() - j);
    for (std::size_t k = 0; k < n; ++k)
      out[j + k] =
          static_cast<std::uint8_t>(((proto >> (8 * k)) & 0xC0) | ((noise >> (8 * k)) & 0x3F));
  }
}

void synthetic_record(const SyntheticSpec& spec, std::uint64_t id, std::span<std::byte> out) {
  std::vector<std::uint8_t> payload(spec.payload_bytes);
  synthetic_payload(spec, id, payload);
  encode_record(out, id, synthetic_label(spec, id), payload);
}

DatasetInfo write_synthetic_dataset(const std::filesystem::path& dir, const SyntheticSpec& spec,
                                    std::uint64_t records_per_shard) {
  ShardWriter w(dir, spec.record_size(), records_per_shard);
  std::vector<std::uint8_t> payload(spec.payload_bytes);
  for (std::uint64_t id = 0; id < spec.records; ++id) {
    synthetic_payload(spec, id, payload);
    w.append(synthetic_label(spec, id), payload);
  }
  return w.finish();
}

void fill_random(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset) {
  std::uint64_t k = offset / 8;
  for (std::size_t j = 0; j < out.size(); j += 8, ++k) {
    const std::uint64_t v = stream_at(seed, k);
    const std::size_t n = std::min<std::size_t>(8, out.size() - j);
    std::memcpy(out.data() + j, &v, n);  // byte order of this machine: a stream, not a format
  }
}

std::uint32_t write_random_file(const std::filesystem::path& path, std::uint64_t bytes,
                                std::uint64_t seed) {
  UniqueFd fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  std::vector<std::byte> buf(std::size_t{4} << 20);
  std::uint32_t crc = 0;
  for (std::uint64_t at = 0; at < bytes; at += buf.size()) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), bytes - at));
    fill_random(std::span<std::byte>(buf.data(), n), seed, at);
    crc = crc32_of(std::span<const std::byte>(buf.data(), n), crc);
    for (std::size_t done = 0; done < n;) {
      const ssize_t w = ::write(fd.get(), buf.data() + done, n - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw std::system_error(errno, std::generic_category(), "write " + path.string());
      }
      done += static_cast<std::size_t>(w);
    }
  }
  if (::fsync(fd.get()) != 0)
    throw std::system_error(errno, std::generic_category(), "fsync " + path.string());
  return crc;
}

}  // namespace concurdl::data
