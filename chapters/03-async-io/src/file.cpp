#include "concurdl/async_io/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>
#include <vector>

namespace concurdl::async_io {

std::filesystem::path temp_root() {
  for (const char* var : {"CONCURDL_TMPDIR", "TMPDIR"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  return "/tmp";
}

TempDir::TempDir(const std::string& prefix) {
  std::string templ = (temp_root() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: a destructor must not throw
}

AlignedBuffer::AlignedBuffer(std::size_t bytes, std::size_t align) : size_(bytes) {
  void* p = nullptr;
  const std::size_t rounded = (bytes + align - 1) / align * align;
  if (::posix_memalign(&p, align, rounded == 0 ? align : rounded) != 0) throw std::bad_alloc();
  std::memset(p, 0, rounded == 0 ? align : rounded);
  data_ = static_cast<std::byte*>(p);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

bool direct_io_supported(const std::filesystem::path& dir, std::string* why) {
  const auto probe = dir / ".concurdl-direct-probe";
  auto say = [&](const std::string& s) {
    if (why != nullptr) *why = s;
    std::error_code ec;
    std::filesystem::remove(probe, ec);
    return false;
  };
  // tmpfs has no device under it: since Linux 6.6 it accepts O_DIRECT, and a "direct" read
  // there is a copy from memory (nor can its pages be dropped to make a read cold).
  if (struct statfs fs{}; ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC)
    return say(
        fmt::format("{} is on tmpfs: there is no device under it (O_DIRECT, which tmpfs "
                    "accepts since Linux 6.6, would read memory); set TMPDIR to a "
                    "directory on a disk",
                    dir.string()));
  {
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      return say(fmt::format("cannot create {}: {}", probe.string(), std::strerror(errno)));
    std::vector<char> block(kDirectAlign, 'x');
    const bool ok = ::write(fd, block.data(), block.size()) == static_cast<ssize_t>(block.size());
    ::close(fd);
    if (!ok) return say(fmt::format("cannot write {}", probe.string()));
  }
  const int fd = ::open(probe.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0)
    return say(
        fmt::format("open(O_DIRECT) in {} fails: {} (some file systems refuse O_DIRECT; set "
                    "TMPDIR to a directory on a disk)",
                    dir.string(), std::strerror(errno)));
  AlignedBuffer buf(kDirectAlign);
  const ssize_t r = ::pread(fd, buf.data(), kDirectAlign, 0);
  const int err = errno;
  ::close(fd);
  if (r != static_cast<ssize_t>(kDirectAlign))
    return say(fmt::format("an aligned O_DIRECT read in {} fails: {}", dir.string(),
                           r < 0 ? std::strerror(err) : "short read"));
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  return true;
}

bool drop_from_page_cache(int fd, std::string* why) {
  if (::fdatasync(fd) != 0 && errno != EINVAL && errno != EBADF) {
    if (why != nullptr) *why = fmt::format("fdatasync: {}", std::strerror(errno));
    return false;
  }
  if (const int e = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); e != 0) {
    if (why != nullptr)
      *why = fmt::format("posix_fadvise(POSIX_FADV_DONTNEED): {}", std::strerror(e));
    return false;
  }
  return true;
}

std::uint64_t file_size(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::system_error(errno, std::generic_category(), "fstat");
  return static_cast<std::uint64_t>(st.st_size);
}

double cached_fraction(int fd) {
  const std::uint64_t size = file_size(fd);
  if (size == 0) return 0;
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int r = ::mincore(p, size, resident.data());
  const int err = errno;
  ::munmap(p, size);
  if (r != 0) throw std::system_error(err, std::generic_category(), "mincore");
  std::size_t in = 0;
  for (unsigned char c : resident) in += c & 1u;
  return static_cast<double>(in) / static_cast<double>(resident.size());
}

}  // namespace concurdl::async_io
