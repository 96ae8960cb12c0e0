#include "concurdl/data/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace concurdl::data {

DataError::DataError(std::string file, std::uint64_t offset, const std::string& what)
    : std::runtime_error(file + ": byte " + std::to_string(offset) + ": " + what),
      file_(std::move(file)),
      offset_(offset) {}

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

UniqueFd open_file(const std::filesystem::path& path, int flags, unsigned mode) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
  return UniqueFd(fd);
}

}  // namespace concurdl::data
