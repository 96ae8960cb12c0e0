// Errors of the data readers. A missing, truncated or corrupt data file is a DataError whose
// message names the file and the byte offset where reading went wrong, so that a user can look:
//   ".../train-images-idx3-ubyte.gz: byte 16: truncated: 47040000 bytes of pixels needed here, ..."
// For gzip files the offset counts decompressed bytes (the IDX layout), not bytes on disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace concurdl::data {

class DataError : public std::runtime_error {
 public:
  DataError(std::string file, std::uint64_t offset, const std::string& what);
  const std::string& file() const noexcept { return file_; }
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::string file_;
  std::uint64_t offset_;
};

// An owned file descriptor: closed on destruction, movable, never copied.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// open(2) with O_CLOEXEC added; throws std::system_error "open PATH: <strerror>" on failure.
UniqueFd open_file(const std::filesystem::path& path, int flags, unsigned mode = 0644);

}  // namespace concurdl::data
