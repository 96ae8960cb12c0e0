#include "concurdl/data/shards.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace concurdl::data {

namespace {

constexpr char kShardMagic[8] = {'C', 'D', 'L', 'S', 'H', 'A', 'R', 'D'};
constexpr char kIndexMagic[8] = {'C', 'D', 'L', 'I', 'N', 'D', 'E', 'X'};
constexpr std::size_t kIndexHead = 32, kIndexEntry = 16 + kShardNameBytes;
constexpr std::size_t kShardHeaderUsed = 40;  // bytes covered by the header's CRC

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

void write_all(int fd, const std::byte* p, std::size_t n, const std::filesystem::path& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + path.string());
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void pwrite_all(int fd, const std::byte* p, std::size_t n, off_t off,
                const std::filesystem::path& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, off);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("pwrite " + path.string());
    }
    p += w;
    off += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Reads up to n bytes at `off`; returns how many there were (less only at the end of the file).
std::size_t pread_some(int fd, std::byte* p, std::size_t n, std::uint64_t off,
                       const std::filesystem::path& path) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno("pread " + path.string());
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::uint64_t file_size(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("fstat " + path.string());
  return static_cast<std::uint64_t>(st.st_size);
}

std::string shard_name(std::size_t i) { return fmt::format("shard-{:05}.cdls", i); }

std::vector<std::byte> shard_header(std::uint32_t record_size, std::uint64_t count,
                                    std::uint64_t first_id) {
  std::vector<std::byte> h(kShardHeaderBytes);
  std::memcpy(h.data(), kShardMagic, 8);
  put_le32(h.data() + 8, kShardFormatVersion);
  put_le32(h.data() + 12, kShardHeaderBytes);
  put_le32(h.data() + 16, record_size);
  put_le32(h.data() + 20, 0);
  put_le64(h.data() + 24, count);
  put_le64(h.data() + 32, first_id);
  put_le32(h.data() + 40, crc32_of(std::span<const std::byte>(h.data(), kShardHeaderUsed)));
  return h;
}

void check_shard(const ShardInfo& s, std::uint32_t record_size) {
  const std::string p = s.path.string();
  UniqueFd fd;
  try {
    fd = open_file(s.path, O_RDONLY);
  } catch (const std::system_error& e) {
    throw DataError(
        p, 0, fmt::format("listed in the index but cannot be opened: {}", e.code().message()));
  }
  const std::uint64_t size = file_size(fd.get(), s.path);
  std::vector<std::byte> h(kShardHeaderBytes);
  const std::size_t got = pread_some(fd.get(), h.data(), h.size(), 0, s.path);
  if (got < kShardHeaderBytes)
    throw DataError(p, got,
                    fmt::format("truncated: the shard header needs {} bytes, the file "
                                "has {}",
                                kShardHeaderBytes, got));
  if (std::memcmp(h.data(), kShardMagic, 8) != 0)
    throw DataError(p, 0, "not a concurdl shard (magic is not \"CDLSHARD\")");
  if (const auto v = get_le32(h.data() + 8); v != kShardFormatVersion)
    throw DataError(
        p, 8, fmt::format("shard format version {}, this reader knows {}", v, kShardFormatVersion));
  const std::uint32_t crc = crc32_of(std::span<const std::byte>(h.data(), kShardHeaderUsed));
  if (get_le32(h.data() + 40) != crc)
    throw DataError(p, 40, "shard header CRC-32 does not match: the header is corrupt");
  if (const auto hb = get_le32(h.data() + 12); hb != kShardHeaderBytes)
    throw DataError(p, 12, fmt::format("header size {} is not {}", hb, kShardHeaderBytes));
  if (const auto rs = get_le32(h.data() + 16); rs != record_size)
    throw DataError(p, 16,
                    fmt::format("record size {} differs from the index's {}", rs, record_size));
  if (const auto c = get_le64(h.data() + 24); c != s.count)
    throw DataError(p, 24, fmt::format("holds {} records, the index says {}", c, s.count));
  if (const auto f = get_le64(h.data() + 32); f != s.first_id)
    throw DataError(p, 32, fmt::format("first id {}, the index says {}", f, s.first_id));
  const std::uint64_t expected = kShardHeaderBytes + s.count * record_size;
  if (size < expected) {
    const std::uint64_t whole = (size - kShardHeaderBytes) / record_size;
    throw DataError(p, size,
                    fmt::format("truncated: {} records of {} bytes need {} bytes, the file has "
                                "{} (it ends inside record {})",
                                s.count, record_size, expected, size, s.first_id + whole));
  }
  if (size > expected)
    throw DataError(p, expected,
                    fmt::format("{} unexpected bytes after the last record", size - expected));
}

}  // namespace

RecordLocation locate(const DatasetInfo& info, std::uint64_t id) {
  if (id >= info.records)
    throw std::out_of_range(
        fmt::format("sample id {} is past the end of the data set ({} "
                    "records)",
                    id, info.records));
  auto it = std::upper_bound(info.shards.begin(), info.shards.end(), id,
                             [](std::uint64_t v, const ShardInfo& s) { return v < s.first_id; });
  const auto shard = static_cast<std::size_t>(it - info.shards.begin()) - 1;
  return {shard, kShardHeaderBytes + (id - info.shards[shard].first_id) * info.record_size};
}

ShardWriter::ShardWriter(std::filesystem::path dir, std::uint32_t record_size,
                         std::uint64_t records_per_shard)
    : dir_(std::move(dir)), record_size_(record_size), per_shard_(records_per_shard) {
  if (record_size_ <= kRecordHeaderBytes)
    throw std::invalid_argument(
        fmt::format("ShardWriter: record size {} leaves no payload after "
                    "the {}-byte header",
                    record_size_, kRecordHeaderBytes));
  if (per_shard_ == 0) throw std::invalid_argument("ShardWriter: records_per_shard must be >= 1");
  std::filesystem::create_directories(dir_);
  info_.dir = dir_;
  info_.record_size = record_size_;
}

ShardWriter::~ShardWriter() = default;  // an unfinished data set keeps no index: readers reject it

void ShardWriter::open_next_shard() {
  ShardInfo s;
  s.path = dir_ / shard_name(info_.shards.size());
  s.first_id = written_;
  shard_ = open_file(s.path, O_WRONLY | O_CREAT | O_TRUNC);
  info_.shards.push_back(s);
  // A placeholder header; close_shard() writes the real one once the count is known.
  const std::vector<std::byte> zeros(kShardHeaderBytes);
  write_all(shard_.get(), zeros.data(), zeros.size(), s.path);
}

void ShardWriter::close_shard() {
  if (!shard_) return;
  ShardInfo& s = info_.shards.back();
  write_all(shard_.get(), buffer_.data(), buffer_.size(), s.path);
  buffer_.clear();
  const auto h = shard_header(record_size_, s.count, s.first_id);
  pwrite_all(shard_.get(), h.data(), h.size(), 0, s.path);
  if (::fsync(shard_.get()) != 0) throw_errno("fsync " + s.path.string());
  shard_.reset();
}

void ShardWriter::append(std::uint32_t label, std::span<const std::uint8_t> payload) {
  if (finished_) throw std::logic_error("ShardWriter::append after finish()");
  if (payload.size() + kRecordHeaderBytes != record_size_)
    throw std::invalid_argument(fmt::format("ShardWriter: payload of {} bytes, records hold {}",
                                            payload.size(), record_size_ - kRecordHeaderBytes));
  if (!shard_ || info_.shards.back().count == per_shard_) {
    close_shard();
    open_next_shard();
  }
  const std::size_t at = buffer_.size();
  buffer_.resize(at + record_size_);
  encode_record(std::span<std::byte>(buffer_.data() + at, record_size_), written_, label, payload);
  ++info_.shards.back().count;
  ++written_;
  if (buffer_.size() >= (std::size_t{1} << 20)) {
    write_all(shard_.get(), buffer_.data(), buffer_.size(), info_.shards.back().path);
    buffer_.clear();
  }
}

DatasetInfo ShardWriter::finish() {
  if (finished_) return info_;
  close_shard();
  info_.records = written_;
  std::vector<std::byte> idx(kIndexHead + kIndexEntry * info_.shards.size() + 4);
  std::memcpy(idx.data(), kIndexMagic, 8);
  put_le32(idx.data() + 8, kShardFormatVersion);
  put_le32(idx.data() + 12, record_size_);
  put_le64(idx.data() + 16, info_.records);
  put_le32(idx.data() + 24, static_cast<std::uint32_t>(info_.shards.size()));
  put_le32(idx.data() + 28, 0);
  for (std::size_t i = 0; i < info_.shards.size(); ++i) {
    std::byte* e = idx.data() + kIndexHead + i * kIndexEntry;
    put_le64(e, info_.shards[i].first_id);
    put_le64(e + 8, info_.shards[i].count);
    const std::string name = info_.shards[i].path.filename().string();
    std::memcpy(e + 16, name.data(), std::min(name.size(), kShardNameBytes - 1));
  }
  const std::size_t body = idx.size() - 4;
  put_le32(idx.data() + body, crc32_of(std::span<const std::byte>(idx.data(), body)));
  // Written under a temporary name and renamed: an index is either complete or absent.
  const auto tmp = dir_ / (std::string(kIndexFileName) + ".tmp");
  {
    UniqueFd fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    write_all(fd.get(), idx.data(), idx.size(), tmp);
    if (::fsync(fd.get()) != 0) throw_errno("fsync " + tmp.string());
  }
  std::filesystem::rename(tmp, dir_ / kIndexFileName);
  finished_ = true;
  return info_;
}

DatasetInfo read_index(const std::filesystem::path& dir) {
  const auto path = dir / kIndexFileName;
  const std::string p = path.string();
  UniqueFd fd;
  try {
    fd = open_file(path, O_RDONLY);
  } catch (const std::system_error& e) {
    throw DataError(p, 0,
                    fmt::format("cannot be opened ({}): not a sharded data set, or one "
                                "whose writing never finished",
                                e.code().message()));
  }
  const std::uint64_t size = file_size(fd.get(), path);
  if (size > (std::uint64_t{64} << 20))
    throw DataError(p, 0, fmt::format("{} bytes is far too large for an index", size));
  std::vector<std::byte> b(size);
  pread_some(fd.get(), b.data(), b.size(), 0, path);
  if (size < kIndexHead + 4)
    throw DataError(p, size,
                    fmt::format("truncated: an index has at least {} bytes, this one {}",
                                kIndexHead + 4, size));
  if (std::memcmp(b.data(), kIndexMagic, 8) != 0)
    throw DataError(p, 0, "not a concurdl index (magic is not \"CDLINDEX\")");
  if (const auto v = get_le32(b.data() + 8); v != kShardFormatVersion)
    throw DataError(
        p, 8, fmt::format("index format version {}, this reader knows {}", v, kShardFormatVersion));
  DatasetInfo info;
  info.dir = dir;
  info.record_size = get_le32(b.data() + 12);
  info.records = get_le64(b.data() + 16);
  const std::uint32_t n = get_le32(b.data() + 24);
  const std::uint64_t expected = kIndexHead + kIndexEntry * std::uint64_t{n} + 4;
  if (size != expected)
    throw DataError(p, std::min(size, expected),
                    fmt::format("{}: {} shards need an index of {} bytes, this one has {}",
                                size < expected ? "truncated" : "unexpected bytes at the end", n,
                                expected, size));
  const std::size_t body = b.size() - 4;
  if (get_le32(b.data() + body) != crc32_of(std::span<const std::byte>(b.data(), body)))
    throw DataError(p, body, "index CRC-32 does not match: the index is corrupt");
  if (info.record_size <= kRecordHeaderBytes || info.record_size > (1u << 30))
    throw DataError(p, 12, fmt::format("implausible record size {}", info.record_size));
  std::uint64_t next = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::byte* e = b.data() + kIndexHead + i * kIndexEntry;
    ShardInfo s;
    s.first_id = get_le64(e);
    s.count = get_le64(e + 8);
    const auto* name = reinterpret_cast<const char*>(e + 16);
    const std::string nm(name, strnlen(name, kShardNameBytes));
    const std::uint64_t at = kIndexHead + i * kIndexEntry;
    if (s.first_id != next)
      throw DataError(p, at,
                      fmt::format("shard {} starts at id {}, expected {}", i, s.first_id, next));
    if (nm.empty() || nm.size() == kShardNameBytes || nm.find('/') != std::string::npos)
      throw DataError(p, at + 16, fmt::format("shard {} has a bad file name", i));
    s.path = dir / nm;
    next += s.count;
    info.shards.push_back(std::move(s));
  }
  if (next != info.records)
    throw DataError(p, 16, fmt::format("says {} records, its shards hold {}", info.records, next));
  for (const ShardInfo& s : info.shards) check_shard(s, info.record_size);
  return info;
}

void verify_records(const DatasetInfo& info) {
  const std::size_t rs = info.record_size;
  const std::size_t per_chunk = std::max<std::size_t>(1, (std::size_t{1} << 20) / rs);
  std::vector<std::byte> buf(per_chunk * rs);
  for (const ShardInfo& s : info.shards) {
    UniqueFd fd = open_file(s.path, O_RDONLY);
    for (std::uint64_t i = 0; i < s.count; i += per_chunk) {
      const std::size_t k =
          static_cast<std::size_t>(std::min<std::uint64_t>(per_chunk, s.count - i));
      const std::uint64_t off = kShardHeaderBytes + i * rs;
      const std::size_t got = pread_some(fd.get(), buf.data(), k * rs, off, s.path);
      if (got < k * rs)
        throw DataError(s.path.string(), off + got, "truncated while verifying the records");
      for (std::size_t j = 0; j < k; ++j) {
        const std::string bad =
            check_record(std::span<const std::byte>(buf.data() + j * rs, rs), s.first_id + i + j);
        if (!bad.empty())
          throw DataError(s.path.string(), off + j * rs,
                          fmt::format("record {}: {}", s.first_id + i + j, bad));
      }
    }
  }
}

DatasetInfo write_labelled_images(const std::filesystem::path& dir, const LabelledImages& data,
                                  std::uint64_t records_per_shard) {
  const std::size_t bytes = data.images.image_bytes();
  ShardWriter w(dir, static_cast<std::uint32_t>(bytes + kRecordHeaderBytes), records_per_shard);
  for (std::size_t i = 0; i < data.size(); ++i)
    w.append(data.labels.labels[i], data.images.image(i));
  return w.finish();
}

ShardedDataset::ShardedDataset(const std::filesystem::path& dir, int extra_flags)
    : ShardedDataset(read_index(dir), extra_flags) {}

ShardedDataset::ShardedDataset(DatasetInfo info, int extra_flags) : info_(std::move(info)) {
  fds_.reserve(info_.shards.size());
  for (const ShardInfo& s : info_.shards) fds_.push_back(open_file(s.path, O_RDONLY | extra_flags));
}

}  // namespace concurdl::data
