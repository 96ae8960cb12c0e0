#include "concurdl/async_io/read_paths.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "concurdl/async_io/sampler.hpp"
#include "concurdl/async_io/team.hpp"
#include "concurdl/async_io/uring.hpp"

namespace concurdl::async_io {

std::vector<std::uint32_t> shuffled_pieces(std::uint64_t bytes, std::size_t request,
                                           std::uint64_t seed) {
  if (request == 0) throw std::invalid_argument("shuffled_pieces: request size 0");
  const std::uint64_t n = (bytes + request - 1) / request;
  if (n > 0xFFFFFFFFull) throw std::invalid_argument("shuffled_pieces: too many pieces");
  return random_permutation<std::uint32_t>(n, seed);
}

namespace {

struct Piece {
  std::uint64_t offset;
  std::size_t len;
};

Piece piece(const ReadJob& job, std::size_t i) {
  const std::uint64_t off = std::uint64_t{job.order[i]} * job.request;
  return {off,
          static_cast<std::size_t>(std::min<std::uint64_t>(job.request, job.dst.size() - off))};
}

void check_job(const ReadJob& job) {
  if (job.depth == 0) throw std::invalid_argument("read job: depth must be >= 1");
  if (job.request == 0) throw std::invalid_argument("read job: request size must be >= 1");
  const std::uint64_t pieces = (job.dst.size() + job.request - 1) / job.request;
  if (job.order.size() != pieces)
    throw std::invalid_argument(
        fmt::format("read job: {} pieces in the order, the file has {}", job.order.size(), pieces));
}

// pread until `len` bytes are in, or the file ends (an error here: the job says how big it is).
void pread_full(int fd, std::byte* dst, std::size_t len, std::uint64_t off) {
  std::size_t got = 0;
  while (got < len) {
    const ssize_t r = ::pread(fd, dst + got, len - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(),
                              fmt::format("pread of {} bytes at offset {}", len - got, off + got));
    }
    if (r == 0)
      throw std::runtime_error(fmt::format("pread at offset {}: the file ends early", off + got));
    got += static_cast<std::size_t>(r);
  }
}

// Blocking reads: member t of a team of `depth` threads reads pieces t, t + depth, ...
ReadRun make_pread(const ReadJob& job) {
  check_job(job);
  auto team = std::make_shared<Team>(job.depth);
  return [job, team] {
    team->run([&job](unsigned t) {
      for (std::size_t i = t; i < job.order.size(); i += job.depth) {
        const Piece p = piece(job, i);
        pread_full(job.fd, job.dst.data() + p.offset, p.len, p.offset);
      }
    });
  };
}

// Page faults instead of system calls: the mapping is made and removed in every run, so a run
// on a cold file really faults its pages in (the kernel keeps mapped pages in the cache).
ReadRun make_mmap(const ReadJob& job) {
  check_job(job);
  auto team = std::make_shared<Team>(job.depth);
  return [job, team] {
    const std::size_t size = job.dst.size();
    if (size == 0) return;
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, job.fd, 0);
    if (m == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    const auto* src = static_cast<const std::byte*>(m);
    try {
      team->run([&job, src](unsigned t) {
        for (std::size_t i = t; i < job.order.size(); i += job.depth) {
          const Piece p = piece(job, i);
          std::memcpy(job.dst.data() + p.offset, src + p.offset, p.len);
        }
      });
    } catch (...) {
      ::munmap(m, size);
      throw;
    }
    ::munmap(m, size);
  };
}

#if CONCURDL_HAVE_URING

constexpr std::size_t kMaxFixedBuffer = std::size_t{1} << 30;  // the kernel's limit per buffer

ReadRun make_uring_impl(const ReadJob& job, bool fixed) {
  check_job(job);
  if (std::string why; !uring_available(&why)) throw std::runtime_error(why);
  auto ring = std::make_shared<Ring>(std::max(1u, job.depth));
  if (fixed) {
    // The destination, registered once (1 GiB per buffer at most); a request names its buffer.
    if (job.dst.size() > kMaxFixedBuffer && kMaxFixedBuffer % job.request != 0)
      throw std::invalid_argument("uring_fixed: over 1 GiB the request size must divide 1 GiB");
    std::vector<iovec> iov;
    for (std::size_t at = 0; at < job.dst.size(); at += kMaxFixedBuffer)
      iov.push_back({job.dst.data() + at, std::min(kMaxFixedBuffer, job.dst.size() - at)});
    if (!iov.empty()) ring->register_buffers(iov);
  }
  auto requests = std::make_shared<std::vector<ReadRequest>>();
  requests->reserve(job.order.size());
  for (std::size_t i = 0; i < job.order.size(); ++i) {
    const Piece p = piece(job, i);
    requests->push_back({job.fd, p.offset, job.dst.data() + p.offset,
                         static_cast<std::uint32_t>(p.len),
                         fixed ? static_cast<int>(p.offset / kMaxFixedBuffer) : -1});
  }
  return [ring, requests, depth = job.depth] { uring_read_batch(*ring, *requests, depth); };
}

ReadRun make_uring(const ReadJob& job) { return make_uring_impl(job, false); }
ReadRun make_uring_fixed(const ReadJob& job) { return make_uring_impl(job, true); }

#else

ReadRun make_uring(const ReadJob&) {
  throw std::runtime_error(capability_missing(Capability::uring));
}
ReadRun make_uring_fixed(const ReadJob& job) { return make_uring(job); }

#endif

constexpr ReadPath kReadPathRows[] = {
    {{"pread",
      "the blocking system call; a queue depth needs that many threads, each waiting in its own "
      "read"},
     true,
     make_pread},
    {{"mmap",
      "no system call per read: page faults bring the file in (the kernel reads ahead on its "
      "own); the copy out of the mapping is the same memcpy pread does"},
     false,
     make_mmap},
    {{"uring",
      "one thread, `depth` reads in flight: requests go into a shared ring and completions come "
      "back in another, one system call per batch instead of per read",
      Capability::uring},
     true,
     make_uring},
    {{"uring_fixed",
      "as uring, with the destination registered, its pages pinned, once (READ_FIXED): with "
      "O_DIRECT the kernel no longer pins and releases them on every request; a read from the "
      "page cache pins nothing (it is a copy), so there it saves little",
      Capability::uring},
     true,
     make_uring_fixed},
};

}  // namespace

const VariantTable<ReadPath>& read_paths() {
  static constexpr VariantTable table{kReadPathRows};
  return table;
}

}  // namespace concurdl::async_io
