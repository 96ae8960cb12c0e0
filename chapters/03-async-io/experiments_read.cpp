// Read throughput vs request size and queue depth for each read path (read_paths.hpp), with the
// file in the page cache, cold (dropped from the cache before every run) and O_DIRECT.
//   concurdl run ch03/read_throughput    page_cache and cold; figures ch03_read_throughput_*
//   concurdl run ch03/read_direct        O_DIRECT (needs a disk file system under $TMPDIR)
//   concurdl exercise ch03               exercise 3.2 is timed here (64 KiB reads, depth 8)
// Every run reads the whole file in a shuffled order into one buffer; its CRC-32 is checked
// against the file's after every run (outside the timing), so a fast wrong read is a failure.
// Speedup is against pread at depth 1 for the same request size and cache state.
#include <fcntl.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "concurdl/async_io/file.hpp"
#include "concurdl/async_io/read_paths.hpp"
#include "concurdl/async_io/uring.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/data/records.hpp"
#include "concurdl/data/synthetic.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "exercises/student_uring.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::async_io;
using Clock = std::chrono::steady_clock;

// Said once per program, not once per configuration.
void note_once(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard lock(mu);
  if (said.insert(what).second) std::fprintf(stderr, "concurdl: note: %s\n", what.c_str());
}

// The axes' limits. A queue depth is that many threads for the blocking paths and that many
// ring entries for io_uring (which takes up to 32768). The file is written to a temporary
// directory and read into a buffer of its size; at 2 GiB its pieces fit their 32-bit numbers
// (shuffled_pieces) whatever the request size.
constexpr std::int64_t kMaxDepth = kMaxThreads;
constexpr std::int64_t kMaxRequest = std::int64_t{1} << 30;
constexpr std::int64_t kMaxFile = std::int64_t{1} << 31;

// One group's file: a temporary directory with `bytes` of pseudo-random data and its CRC.
struct TestFile {
  std::shared_ptr<TempDir> dir;
  std::filesystem::path path;
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
};

TestFile& file_for(const Params& p, GroupCache& cache) {
  return cache.get<TestFile>("file", [&] {
    TestFile f;
    f.bytes = static_cast<std::uint64_t>(param_int(p, "file"));
    if (f.bytes % kDirectAlign != 0)
      throw UsageError(
          fmt::format("parameter 'file': {} is not a multiple of {}", f.bytes, kDirectAlign));
    f.dir = std::make_shared<TempDir>("concurdl-ch03-read");
    f.path = f.dir->path() / "data.bin";
    f.crc = data::write_random_file(f.path, f.bytes, 2024);
    return f;
  });
}

// The state one configuration keeps between runs.
struct ReadState {
  UniqueFd fd;
  AlignedBuffer dst;
  std::vector<std::uint32_t> order;
  ReadRun run;
  std::uint32_t last_crc = 0;
  bool cold = false;
};

// Times the read alone (measure), then checks its bytes outside the timing.
Trial read_trial(std::shared_ptr<ReadState> st, std::uint32_t expected_crc, std::uint64_t bytes) {
  Trial t;
  t.reset = [st] {
    if (st->cold) drop_from_page_cache(st->fd.get());
  };
  t.measure = [st] {
    const auto t0 = Clock::now();
    st->run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    st->last_crc = data::crc32_of(std::span<const std::byte>(st->dst.data(), st->dst.size()));
    std::memset(st->dst.data(), 0, st->dst.size());  // the next run must read everything again
    return s;
  };
  t.check = [st, expected_crc] {
    return st->last_crc == expected_crc
               ? std::string()
               : fmt::format("CRC-32 of the bytes read is {:08x}, the file's is {:08x}",
                             st->last_crc, expected_crc);
  };
  t.work = {.bytes = static_cast<double>(bytes)};
  return t;
}

std::size_t request_of(const Params& p) {
  return static_cast<std::size_t>(param_int(p, "request"));  // at most 1 GiB (kMaxRequest)
}

Trial buffered_trial(const Params& p, GroupCache& cache) {
  const ReadPath& rp = read_paths().find(p);
  TestFile& f = file_for(p, cache);
  const std::string& cache_state = param_str(p, "cache");
  if (cache_state != "page_cache" && cache_state != "cold")
    throw UsageError(
        fmt::format("parameter 'cache': '{}' is neither page_cache nor cold "
                    "(O_DIRECT is ch03/read_direct)",
                    cache_state));
  auto st = std::make_shared<ReadState>();
  st->fd = data::open_file(f.path, O_RDONLY);
  st->cold = cache_state == "cold";
  if (st->cold) {
    std::string why;
    if (!drop_from_page_cache(st->fd.get(), &why) || cached_fraction(st->fd.get()) > 0.5)
      note_once(
          fmt::format("ch03/read_throughput: the kernel kept the file cached after "
                      "POSIX_FADV_DONTNEED{}; 'cold' rows are not cold here",
                      why.empty() ? "" : " (" + why + ")"));
  }
  const std::size_t request = request_of(p);
  st->dst = AlignedBuffer(f.bytes);
  st->order = shuffled_pieces(f.bytes, request, 7);
  st->run = rp.make({st->fd.get(), st->dst.span(), request, st->order,
                     static_cast<unsigned>(param_int(p, "qd"))});
  return read_trial(st, f.crc, f.bytes);
}

Trial direct_trial(const Params& p, GroupCache& cache) {
  const ReadPath& rp = read_paths().find(p);
  if (!rp.direct_ok)
    throw UsageError(fmt::format("parameter 'variant': '{}' cannot read O_DIRECT", rp.name));
  TestFile& f = file_for(p, cache);
  const std::size_t request = request_of(p);
  if (request % kDirectAlign != 0)
    throw UsageError(
        fmt::format("parameter 'request': O_DIRECT needs a multiple of {}", kDirectAlign));
  auto st = std::make_shared<ReadState>();
  std::string why;
  if (direct_io_supported(f.dir->path(), &why)) {
    st->fd = data::open_file(f.path, O_RDONLY | O_DIRECT);
  } else {
    // Fall back to the closest thing, and say so: buffered reads of a file dropped from the
    // cache before every run (the same as ch03/read_throughput's cold rows).
    note_once("ch03/read_direct: " + why +
              "; these rows measure buffered reads of a cold file "
              "instead (direct: unsupported)");
    st->fd = data::open_file(f.path, O_RDONLY);
    st->cold = true;
  }
  st->dst = AlignedBuffer(f.bytes);
  st->order = shuffled_pieces(f.bytes, request, 7);
  st->run = rp.make({st->fd.get(), st->dst.span(), request, st->order,
                     static_cast<unsigned>(param_int(p, "qd"))});
  Trial t = read_trial(st, f.crc, f.bytes);
  if (st->cold)
    t.notes["direct"] = "unsupported (" + why + "): buffered reads of a cold file measured instead";
  return t;
}

bool reads_direct(const ReadPath& r) { return r.direct_ok; }

#if CONCURDL_HAVE_URING
// Exercise 3.2: the student's batched read against the reference, 64 KiB pieces at depth 8.
Trial exercise_uring_trial(Impl impl, const Params& p, GroupCache& cache) {
  if (std::string why; !uring_available(&why)) throw std::runtime_error(why);
  TestFile& f = file_for(p, cache);
  const bool student = impl == Impl::student;
  const auto depth = static_cast<unsigned>(param_int(p, "qd"));
  const std::size_t request = request_of(p);
  auto st = std::make_shared<ReadState>();
  st->fd = data::open_file(f.path, O_RDONLY);
  st->dst = AlignedBuffer(f.bytes);
  st->order = shuffled_pieces(f.bytes, request, 7);
  auto ring = std::make_shared<Ring>(depth);
  auto reqs = std::make_shared<std::vector<ReadRequest>>();
  for (std::uint32_t piece : st->order) {
    const std::uint64_t off = std::uint64_t{piece} * request;
    reqs->push_back({st->fd.get(), off, st->dst.data() + off,
                     static_cast<std::uint32_t>(std::min<std::uint64_t>(request, f.bytes - off)),
                     -1});
  }
  st->run = [ring, reqs, depth, student] {
    if (student)
      student_uring_read_batch(*ring, *reqs, depth);
    else
      uring_read_batch(*ring, *reqs, depth);
  };
  return read_trial(st, f.crc, f.bytes);
}
#endif

// The axes of both experiments after the read path (and the cache state).
Axis qd_axis() { return {"qd", {"1", "2", "8", "32"}, {"1", "8"}, AxisKind::count, kMaxDepth}; }
Axis request_axis() {
  return {"request",
          {"4K", "16K", "64K", "256K", "1M"},
          {"4K", "64K", "1M"},
          AxisKind::size,
          kMaxRequest};
}
Axis file_axis() { return {"file", {"256M"}, {"32M"}, AxisKind::size, kMaxFile}; }

std::vector<Figure> read_throughput_figures() {
  return {{.id = "page_cache_size",
           .title = "Page cache: bytes/s vs request size (shuffled whole-file read)",
           .kind = FigureKind::lines,
           .x = "request",
           .y = "bytes_per_s",
           .series = "variant",
           .where = {{"cache", "page_cache"}},
           .log_x = true,
           .y_label = "bytes/s"},
          {.id = "cold_size",
           .title = "Cold (dropped from the page cache): bytes/s vs request size",
           .kind = FigureKind::lines,
           .x = "request",
           .y = "bytes_per_s",
           .series = "variant",
           .where = {{"cache", "cold"}},
           .log_x = true,
           .log_y = true,
           .y_label = "bytes/s (log)"},
          {.id = "page_cache_qd",
           .title = "Page cache, 4 KiB requests: bytes/s vs queue depth",
           .kind = FigureKind::lines,
           .x = "qd",
           .y = "bytes_per_s",
           .series = "variant",
           .where = {{"cache", "page_cache"}, {"request", "4K"}},
           .log_x = true,
           .y_label = "bytes/s"},
          {.id = "cold_qd",
           .title = "Cold, 4 KiB requests: bytes/s vs queue depth",
           .kind = FigureKind::lines,
           .x = "qd",
           .y = "bytes_per_s",
           .series = "variant",
           .where = {{"cache", "cold"}, {"request", "4K"}},
           .log_x = true,
           .y_label = "bytes/s"}};
}

Experiment read_throughput_experiment() {
  return {
      .id = "ch03/read_throughput",
      .chapter = "03-async-io",
      .title =
          "Read throughput vs request size and queue depth: pread, mmap, io_uring; page "
          "cache and cold",
      .axes = {read_paths().axis("ch03/read_throughput"),
               {"cache", {"page_cache", "cold"}},
               qd_axis(),
               request_axis(),
               file_axis()},
      .baseline = {{"variant", "pread"}, {"qd", "1"}},
      // One group per cache state and file size: one file on disk and one buffer in memory at a
      // time; every path, depth and request size of the group is measured round-robin.
      .interleave = {"variant", "qd", "request"},
      .prepare = buffered_trial,
      .figures = read_throughput_figures(),
      .claims =
          {{.id = "page_cache_depth_does_not_pay",
            // Magnitude: a cached 4 KiB read is a memory copy either way, but how io_uring
            // completes it (inline or on its io-wq workers, on the other vCPU) is the kernel's and
            // the machine's: 0.79-1.09x over the committed runs.
            .statement =
                "When the file is in the page cache a 4 KiB read is a memory copy: how io_uring "
                "with 8 reads in flight compares with pread one at a time (about 1x: depth buys "
                "little)",
            .select =
                {{"variant", "uring"}, {"qd", "8"}, {"request", "4K"}, {"cache", "page_cache"}},
            .versus = {{"variant", "pread"}, {"qd", "1"}},
            .compare = Claim::Compare::at_most,
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::page_cache, ClaimCause::cores_and_smt},
            .unit = "×"}},
  };
}

Experiment read_direct_experiment() {
  return {
      .id = "ch03/read_direct",
      .chapter = "03-async-io",
      .title = "O_DIRECT read throughput vs request size and queue depth: pread vs io_uring",
      .axes = {read_paths().axis("ch03/read_direct", {.where = reads_direct}), qd_axis(),
               request_axis(), file_axis()},
      .baseline = {{"variant", "pread"}, {"qd", "1"}},
      .interleave = {"variant", "qd", "request"},
      .prepare = direct_trial,
      .figures = {{.id = "size",
                   .title = "O_DIRECT: bytes/s vs request size",
                   .kind = FigureKind::lines,
                   .x = "request",
                   .y = "bytes_per_s",
                   .series = "variant",
                   .log_x = true,
                   .log_y = true,
                   .y_label = "bytes/s (log)"},
                  {.id = "qd",
                   .title = "O_DIRECT, 4 KiB requests: bytes/s vs queue depth",
                   .kind = FigureKind::lines,
                   .x = "qd",
                   .y = "bytes_per_s",
                   .series = "variant",
                   .where = {{"request", "4K"}},
                   .log_x = true,
                   .y_label = "bytes/s"}},
      .claims =
          {{.id = "direct_depth_pays",
            // Magnitude: what reads in flight buy is the device's (its queues, and whether a host
            // cache is under the guest's disk): 1.43-1.82x on the 2-vCPU guests, 1.0x on the
            // 16-vCPU one.
            .statement =
                "With O_DIRECT every read waits for the device: how much faster io_uring with 8 "
                "reads in flight reads the file than pread one at a time, at the worst request "
                "size",
            .select = {{"variant", "uring"}, {"qd", "8"}},
            .versus = {{"variant", "pread"}, {"qd", "1"}},
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::page_cache},
            .unit = "×"}},
  };
}

const bool registered = [] {
  register_experiment(read_throughput_experiment());
  register_experiment(read_direct_experiment());
  return true;
}();

}  // namespace

// The timed half of exercise 3.2 (exercise_timings.hpp).
#if CONCURDL_HAVE_URING
namespace concurdl::async_io::exercise_timings {

Experiment uring_read() {
  return exercise_timing({.title = "batched io_uring read, student vs reference, 64 KiB pieces "
                                   "at depth 8, page cache",
                          .threads_axis = "",
                          .axes = {{"qd", {"8"}, {}, AxisKind::count, kMaxDepth},
                                   {"request", {"64K"}, {}, AxisKind::size, kMaxRequest},
                                   {"file", {"64M"}, {"16M"}, AxisKind::size, kMaxFile}},
                          .prepare = exercise_uring_trial});
}

}  // namespace concurdl::async_io::exercise_timings
#endif
