// io_uring through liburing: a submission queue the program fills and a completion queue the
// kernel fills, shared memory between the two, so one thread can keep many reads in flight and
// collect their results without a system call per request (Axboe, "Efficient IO with
// io_uring", 2019). Everything here is compiled only when CMake found liburing
// (CONCURDL_HAVE_URING); uring_available() exists either way and says why not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#if CONCURDL_HAVE_URING
#include <liburing.h>
#include <sys/uio.h>
#endif

#include "concurdl/core/variants.hpp"

namespace concurdl::async_io {

// Whether io_uring can be used in this process: built with liburing, and the kernel lets us
// (kernel.io_uring_disabled, a seccomp filter such as Docker's default profile, or an old
// kernel refuse it) with IORING_OP_READ and IORING_OP_READ_FIXED. Probed once; `why` says what
// refused it.
bool uring_available(std::string* why = nullptr);

// Variant rows that need io_uring (Capability::uring) are offered only where this probe says it
// works. An inline variable: in place before the tables of any file that includes this header
// are used.
inline const bool uring_probe_registered = register_capability_probe(Capability::uring, [] {
  std::string why;
  return uring_available(&why) ? std::string() : why;
});

#if CONCURDL_HAVE_URING

// An io_uring instance (RAII): io_uring_queue_init / io_uring_queue_exit.
class Ring {
 public:
  explicit Ring(unsigned entries);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  io_uring* get() { return &ring_; }
  unsigned entries() const { return entries_; }

  // Pin these buffers once (io_uring_register_buffers) so reads can name them by index
  // (IORING_OP_READ_FIXED). With O_DIRECT the kernel then skips pinning and releasing the user
  // pages on every request (io_uring_register_buffers(3)); a read from the page cache pins
  // nothing either way (it is a copy), so there registration saves little.
  // Pinned pages count against RLIMIT_MEMLOCK for users without CAP_IPC_LOCK. Throws on
  // failure.
  void register_buffers(std::span<const iovec> buffers);
  bool has_buffers() const { return registered_; }

 private:
  io_uring ring_{};
  unsigned entries_;
  bool registered_ = false;
};

// One read of `len` bytes at `offset` of `fd` into `buf`. buf_index >= 0: `buf` lies inside the
// ring's registered buffer of that index, and the read is IORING_OP_READ_FIXED.
struct ReadRequest {
  int fd = -1;
  std::uint64_t offset = 0;
  std::byte* buf = nullptr;
  std::uint32_t len = 0;
  int buf_index = -1;
};

// Reads every request completely with at most `depth` in flight: fill the submission queue up
// to `depth`, submit, reap completions, refill. A short read is resubmitted for the rest; a
// read past the end of the file or an error throws std::system_error naming the offset, after
// every request in flight has completed (the kernel writes into the caller's buffers until
// then).
void uring_read_batch(Ring& ring, std::span<const ReadRequest> requests, unsigned depth);

#endif

}  // namespace concurdl::async_io
