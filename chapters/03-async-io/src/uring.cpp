#include "concurdl/async_io/uring.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace concurdl::async_io {

#if CONCURDL_HAVE_URING

namespace {

struct Probe {
  bool ok = false;
  std::string why;
};

Probe probe_uring() {
  io_uring ring{};
  const int r = io_uring_queue_init(4, &ring, 0);
  if (r < 0) {
    std::string hint;
    std::ifstream disabled("/proc/sys/kernel/io_uring_disabled");
    int d = 0;
    if (disabled >> d && d != 0)
      hint = fmt::format("; kernel.io_uring_disabled = {}", d);
    else if (r == -EPERM)
      hint = "; a seccomp filter (Docker's default profile blocks io_uring) or a sysctl refuses it";
    else if (r == -ENOSYS)
      hint = "; this kernel has no io_uring (it needs Linux 5.6 or later)";
    return {false, fmt::format("io_uring_queue_init failed: {}{}", std::strerror(-r), hint)};
  }
  Probe p{true, ""};
  if (io_uring_probe* pr = io_uring_get_probe_ring(&ring)) {
    for (int op : {IORING_OP_READ, IORING_OP_READ_FIXED, IORING_OP_TIMEOUT})
      if (!io_uring_opcode_supported(pr, op)) {
        p = {false,
             fmt::format("this kernel's io_uring lacks opcode {} (READ needs Linux 5.6)", op)};
        break;
      }
    io_uring_free_probe(pr);
  }
  io_uring_queue_exit(&ring);
  return p;
}

}  // namespace

bool uring_available(std::string* why) {
  static const Probe p = probe_uring();
  if (why != nullptr) *why = p.why;
  return p.ok;
}

Ring::Ring(unsigned entries) : entries_(entries) {
  if (entries == 0) throw std::invalid_argument("Ring: need at least one entry");
  if (const int r = io_uring_queue_init(entries, &ring_, 0); r < 0)
    throw std::system_error(-r, std::generic_category(), "io_uring_queue_init");
}

Ring::~Ring() { io_uring_queue_exit(&ring_); }

void Ring::register_buffers(std::span<const iovec> buffers) {
  if (registered_) {
    io_uring_unregister_buffers(&ring_);
    registered_ = false;
  }
  const int r =
      io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
  if (r < 0)
    throw std::system_error(-r, std::generic_category(),
                            r == -ENOMEM ? "io_uring_register_buffers (RLIMIT_MEMLOCK too low? "
                                           "see ulimit -l)"
                                         : "io_uring_register_buffers");
  registered_ = true;
}

void uring_read_batch(Ring& ring, std::span<const ReadRequest> requests, unsigned depth) {
  if (depth == 0) throw std::invalid_argument("uring_read_batch: depth must be >= 1");
  io_uring* r = ring.get();
  const std::size_t n = requests.size();
  std::vector<std::uint32_t> got(n, 0);  // bytes of each request read so far
  std::vector<std::size_t> again;        // short reads waiting to be resubmitted for the rest
  std::size_t next = 0, in_flight = 0, done = 0;
  int error = 0;
  std::size_t error_at = 0;

  while (done < n) {
    // Fill: resubmissions first, then new requests, never more than `depth` in flight. After an
    // error nothing new is issued; only what is in flight is collected.
    while (error == 0 && in_flight < depth && (!again.empty() || next < n)) {
      io_uring_sqe* sqe = io_uring_get_sqe(r);
      if (sqe == nullptr) break;  // submission queue full: submit what is there first
      std::size_t i;
      if (!again.empty()) {
        i = again.back();
        again.pop_back();
      } else {
        i = next++;
      }
      const ReadRequest& q = requests[i];
      std::byte* dst = q.buf + got[i];
      const unsigned len = q.len - got[i];
      const std::uint64_t off = q.offset + got[i];
      if (q.buf_index >= 0)
        io_uring_prep_read_fixed(sqe, q.fd, dst, len, off, q.buf_index);
      else
        io_uring_prep_read(sqe, q.fd, dst, len, off);
      io_uring_sqe_set_data64(sqe, i);
      ++in_flight;
    }
    if (in_flight == 0) break;  // only after an error: everything issued has completed
    // One system call submits everything queued and waits for at least one completion.
    if (const int s = io_uring_submit_and_wait(r, 1); s < 0 && s != -EINTR)
      throw std::system_error(-s, std::generic_category(), "io_uring_submit_and_wait");
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(r, head, cqe) {
      ++seen;
      --in_flight;
      const auto i = static_cast<std::size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      if (res == -EAGAIN || res == -EINTR) {
        again.push_back(i);
      } else if (res < 0 || (res == 0 && got[i] < requests[i].len)) {
        if (error == 0) {
          error = res < 0 ? -res : EIO;
          error_at = i;
        }
        ++done;
      } else {
        got[i] += static_cast<std::uint32_t>(res);
        if (got[i] < requests[i].len)
          again.push_back(i);  // short read: the rest, again
        else
          ++done;
      }
    }
    io_uring_cq_advance(r, seen);
  }
  if (error != 0) {
    const ReadRequest& q = requests[error_at];
    throw std::system_error(
        error, std::generic_category(),
        fmt::format("io_uring read of {} bytes at offset {}{}", q.len, q.offset + got[error_at],
                    error == EIO && got[error_at] < q.len ? " (past the end of the file?)" : ""));
  }
}

#else

bool uring_available(std::string* why) {
  if (why != nullptr)
    *why = "built without liburing (apt-get install liburing-dev, then configure again)";
  return false;
}

#endif

}  // namespace concurdl::async_io
