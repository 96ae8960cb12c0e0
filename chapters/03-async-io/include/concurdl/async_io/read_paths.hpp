// Four ways to read a file into memory, side by side. Each reads the whole file into one buffer
// in pieces of `request` bytes, in a shuffled order (a data loader's access pattern), with
// `depth` requests in flight:
//   pread        the blocking system call; depth = that many threads, each one read at a time
//   mmap         map the file and copy out of the mapping: page faults instead of system calls
//                (the kernel reads ahead on its own); depth = threads copying
//   uring        one thread, io_uring, `depth` reads in flight, results reaped in batches
//   uring_fixed  uring with the destination registered, its pages pinned, once
//                (IORING_OP_READ_FIXED): with O_DIRECT no pinning and release per request; a
//                page-cache read pins nothing anyway (the kernel copies), so there it saves
//                little
// and three states of the file: in the page cache (reads are memcpy), cold (dropped from the
// cache before each run: the device's speed), and direct (O_DIRECT: no page cache at all,
// aligned requests, the device's speed for every run). mmap cannot bypass the cache, so it has
// no direct mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/async_io/uring.hpp"
#include "concurdl/core/variants.hpp"

namespace concurdl::async_io {

// One job: the whole file behind `fd` into `dst` (dst.size() == the file's size), piece
// order[i] covering bytes [order[i] * request, + request) (the last piece may be shorter).
struct ReadJob {
  int fd = -1;
  std::span<std::byte> dst;
  std::size_t request = 0;
  std::span<const std::uint32_t> order;
  unsigned depth = 1;
};

// The pieces of a file of `bytes` in `request`-byte reads, shuffled deterministically by `seed`.
std::vector<std::uint32_t> shuffled_pieces(std::uint64_t bytes, std::size_t request,
                                           std::uint64_t seed);

// Setup (threads, a ring, buffer registration) happens in make(), outside any timing; the
// function it returns does the reads, and may be called again for the next run.
using ReadRun = std::function<void()>;

struct ReadPath : VariantInfo {
  bool direct_ok;  // can read an O_DIRECT file descriptor
  ReadRun (*make)(const ReadJob& job);
};

// Simplest first; the io_uring rows need Capability::uring (without liburing their `make`
// throws, and the harness never offers them).
const VariantTable<ReadPath>& read_paths();

}  // namespace concurdl::async_io
