// Files for I/O experiments: a temporary directory that removes itself, page-aligned buffers
// (what O_DIRECT reads into), dropping a file from the page cache so that the next read comes
// from the device ("cold"), and finding out whether O_DIRECT works on a file system at all
// (tmpfs refuses it before Linux 6.6; from 6.6 it accepts it, but serves it from memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "concurdl/data/error.hpp"

namespace concurdl::async_io {

using data::UniqueFd;

// O_DIRECT wants buffer addresses, file offsets and lengths aligned to the device's logical
// block size; 4096 satisfies every common device.
inline constexpr std::size_t kDirectAlign = 4096;

// $CONCURDL_TMPDIR, else $TMPDIR, else /tmp. For direct-I/O experiments it must be on a disk
// file system (ext4, xfs, btrfs), not tmpfs.
std::filesystem::path temp_root();

// A fresh directory PREFIX-XXXXXX under temp_root(); it and everything in it are removed on
// destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "concurdl-ch03");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Zeroed bytes at an aligned address (posix_memalign); move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes, std::size_t align = kDirectAlign);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<std::byte> span() const { return {data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Whether a file in `dir` can be opened with O_DIRECT and read with an aligned request. When
// not, `why` says what refused it (open: EINVAL on tmpfs before Linux 6.6, for instance). It
// cannot tell a file system that accepts O_DIRECT without a device behind it (tmpfs from 6.6).
bool direct_io_supported(const std::filesystem::path& dir, std::string* why = nullptr);

// Write the file's dirty pages back, then ask the kernel to drop its pages from the page cache
// (POSIX_FADV_DONTNEED): the next read has to go to the device. Pages that are mapped by some
// process stay. Returns false, and why, when the kernel refused.
bool drop_from_page_cache(int fd, std::string* why = nullptr);

// The fraction of the file's pages in the page cache now (mincore on a fresh mapping).
double cached_fraction(int fd);

std::uint64_t file_size(int fd);

}  // namespace concurdl::async_io
