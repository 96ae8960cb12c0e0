// Chapter 03's entry in the harness; each topic registers its experiments in its own
// experiments_*.cpp next to this file:
//   experiments_read.cpp     ch03/read_throughput, ch03/read_direct, exercise 3.2
//   experiments_loaders.cpp  ch03/loader_epoch (with the overlap efficiency), ch03/loader_workers,
//                            exercises 3.1 and 3.3
//   experiments_events.cpp   ch03/fan_in (epoll vs io_uring vs threads), ch03/continuations
// Temporary files go to a directory under $TMPDIR (or /tmp) that each experiment creates and
// removes; for O_DIRECT it must be on a disk file system, not tmpfs.
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered = concurdl::register_chapter(
    {"03-async-io",
     "Asynchronous I/O and data loading: pread, mmap, io_uring, prefetching "
     "loaders, compute/I-O overlap"});
}  // namespace
