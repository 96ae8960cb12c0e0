#include "concurdl/async_io/store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "concurdl/async_io/file.hpp"

namespace concurdl::async_io {

std::string_view to_string(ReadMode m) {
  switch (m) {
    case ReadMode::pread:
      return "pread";
    case ReadMode::mmap:
      return "mmap";
    case ReadMode::direct:
      return "direct";
  }
  return "?";
}

ReadMode parse_read_mode(std::string_view s) {
  for (ReadMode m : {ReadMode::pread, ReadMode::mmap, ReadMode::direct})
    if (s == to_string(m)) return m;
  throw std::invalid_argument(fmt::format("'{}' is not a read mode (pread, mmap, direct)", s));
}

namespace {

data::ShardedDataset open_dataset(const std::filesystem::path& dir, ReadMode mode) {
  data::DatasetInfo info = data::read_index(dir);
  if (mode != ReadMode::direct) return data::ShardedDataset(std::move(info), 0);
  try {
    return data::ShardedDataset(std::move(info), O_DIRECT);
  } catch (const std::system_error& e) {
    throw DirectIoUnsupported(
        fmt::format("O_DIRECT refused in {} ({}): some file systems do not support it "
                    "(tmpfs before Linux 6.6)",
                    dir.string(), e.what()));
  }
}

// pread until `len` bytes are in; returns fewer only at the end of the file.
std::size_t pread_upto(int fd, std::byte* dst, std::size_t len, std::uint64_t off,
                       const std::string& path) {
  std::size_t got = 0;
  while (got < len) {
    const ssize_t r = ::pread(fd, dst + got, len - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw data::DataError(path, off + got, fmt::format("pread: {}", std::strerror(errno)));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

RecordStore::RecordStore(const std::filesystem::path& dir, StoreOptions opt)
    : opt_(opt), ds_(open_dataset(dir, opt.mode)), throttle_(opt.storage) {
  if (opt_.mode == ReadMode::mmap) {
    for (std::size_t s = 0; s < ds_.shards(); ++s) {
      const std::size_t size = static_cast<std::size_t>(file_size(ds_.fd(s)));
      void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, ds_.fd(s), 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        for (auto& [q, n] : maps_) ::munmap(const_cast<std::byte*>(q), n);
        throw std::system_error(err, std::generic_category(), "mmap " + ds_.shard_path(s).string());
      }
      maps_.emplace_back(static_cast<const std::byte*>(p), size);
    }
  }
}

RecordStore::~RecordStore() {
  for (auto& [p, n] : maps_) ::munmap(const_cast<std::byte*>(p), n);
}

std::string RecordStore::shard_path(std::uint64_t id) const {
  return ds_.shard_path(ds_.locate(id).shard).string();
}

void RecordStore::read(std::uint64_t id, std::span<std::byte> out) const {
  const std::size_t rs = record_size();
  if (out.size() != rs)
    throw std::invalid_argument(
        fmt::format("RecordStore::read: buffer of {} bytes for a {}-byte "
                    "record",
                    out.size(), rs));
  count_reads(1);
  // The throttle's clock starts when the request is issued, before the real read.
  const bool throttled = throttle_.model().active();
  const auto done = throttled ? throttle_.admit(rs) : Throttle::clock::time_point{};
  const data::RecordLocation loc = ds_.locate(id);
  const int fd = ds_.fd(loc.shard);
  switch (opt_.mode) {
    case ReadMode::pread:
      if (pread_upto(fd, out.data(), rs, loc.offset, ds_.shard_path(loc.shard).string()) < rs)
        throw data::DataError(ds_.shard_path(loc.shard).string(), loc.offset,
                              fmt::format("record {}: the file ends inside it", id));
      break;
    case ReadMode::mmap: {
      const auto& [base, size] = maps_[loc.shard];
      if (loc.offset + rs > size)
        throw data::DataError(ds_.shard_path(loc.shard).string(), loc.offset,
                              fmt::format("record {}: the file ends inside it", id));
      std::memcpy(out.data(), base + loc.offset, rs);
      break;
    }
    case ReadMode::direct: {
      // The whole pages around the record, into an aligned buffer of this thread's, then a copy.
      const std::uint64_t start = loc.offset / kDirectAlign * kDirectAlign;
      const std::uint64_t end = (loc.offset + rs + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
      thread_local AlignedBuffer bounce;
      if (bounce.size() < end - start) bounce = AlignedBuffer(end - start);
      const std::size_t got =
          pread_upto(fd, bounce.data(), end - start, start, ds_.shard_path(loc.shard).string());
      if (got < loc.offset - start + rs)
        throw data::DataError(ds_.shard_path(loc.shard).string(), loc.offset,
                              fmt::format("record {}: the file ends inside it", id));
      std::memcpy(out.data(), bounce.data() + (loc.offset - start), rs);
      break;
    }
  }
  if (throttled) sleep_until_precise(done);
}

}  // namespace concurdl::async_io
