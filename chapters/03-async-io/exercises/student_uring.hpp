// Exercise 3.2: a batched io_uring read (chapter 03, exercises.md).
//
// Read every request completely, keeping at most `depth` reads in flight on one thread: the
// contract of uring_read_batch in include/concurdl/async_io/uring.hpp.
//   1. fill: while fewer than `depth` are in flight and requests remain, take an SQE
//      (io_uring_get_sqe; nullptr means the submission queue is full), prepare it
//      (io_uring_prep_read, or io_uring_prep_read_fixed when buf_index >= 0) and tag it with the
//      request's index (io_uring_sqe_set_data64)
//   2. submit and wait for at least one completion: io_uring_submit_and_wait(ring, 1)
//   3. reap every completion there is (io_uring_for_each_cqe, then io_uring_cq_advance):
//      cqe->res is the byte count or -errno. A short read (0 < res < what was asked) must be
//      resubmitted for the rest; res == 0 before the request is complete means the file ended
//   4. repeat until every request is complete
// On an error throw std::system_error, but only once nothing is in flight any more: until a
// read completes the kernel may still write into the caller's buffer.
// Only compiled with liburing; without it the tests skip.
// Check it:   concurdl exercise ch03
// or faster:  ch03_tests --gtest_filter='UringBatch/student.*'
#pragma once

#include <span>

#include "concurdl/async_io/uring.hpp"
#include "concurdl/core/errors.hpp"

namespace concurdl::async_io {

#if CONCURDL_HAVE_URING

inline void student_uring_read_batch([[maybe_unused]] Ring& ring,
                                     [[maybe_unused]] std::span<const ReadRequest> requests,
                                     [[maybe_unused]] unsigned depth) {
  CDL_TODO("3.2 batched io_uring read");
}

#endif

}  // namespace concurdl::async_io
