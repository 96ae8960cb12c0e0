#include "concurdl/async_io/loaders_uring.hpp"

#include "concurdl/core/trace.hpp"

#if CONCURDL_HAVE_URING

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "concurdl/async_io/file.hpp"
#include "concurdl/async_io/uring.hpp"

namespace concurdl::async_io {

UringLoader::UringLoader(const RecordStore& store, LoaderOptions opt) : assembler_(store, opt) {
  if (store.mode() != ReadMode::pread)
    throw std::invalid_argument(
        fmt::format("UringLoader reads through the page cache; the store "
                    "is opened with ReadMode::{}",
                    to_string(store.mode())));
  if (opt.workers == 0) throw std::invalid_argument("UringLoader: workers (reads in flight) >= 1");
  if (opt.prefetch == 0) throw std::invalid_argument("UringLoader: prefetch must be >= 1");
  if (std::string why; !uring_available(&why))
    throw std::runtime_error("UringLoader: io_uring unavailable: " + why);
}

void UringLoader::start_epoch(std::uint64_t epoch) {
  stop();
  plan_ = EpochPlan(assembler_.store().size(), assembler_.options(), epoch);
  queue_ = std::make_unique<BoundedQueue<Batch>>(assembler_.options().prefetch);
  thread_ = std::jthread([this](std::stop_token st) {
    trace::set_track("uring loader");
    run(st);
  });
}

std::optional<Batch> UringLoader::next_batch() {
  if (!queue_) return std::nullopt;
  return queue_->take();
}

void UringLoader::stop() {
  thread_.request_stop();
  if (queue_) queue_->close();
  if (thread_.joinable()) thread_.join();
}

void UringLoader::run(std::stop_token st) {
  try {
    loop(st);
  } catch (...) {
    queue_->fail(std::current_exception());
  }
}

namespace {

// user_data: slot << 33 | record << 1 | (1 for the throttle's timer, 0 for the read)
std::uint64_t tag(std::size_t slot, std::size_t k, bool timer) {
  return (std::uint64_t{slot} << 33) | (std::uint64_t{k} << 1) | (timer ? 1u : 0u);
}

__kernel_timespec to_timespec(Throttle::clock::time_point t) {
  // steady_clock is CLOCK_MONOTONIC on Linux, the clock IORING_TIMEOUT_ABS uses.
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return {static_cast<long long>(ns / 1'000'000'000), static_cast<long long>(ns % 1'000'000'000)};
}

}  // namespace

void UringLoader::loop(std::stop_token st) {
  const RecordStore& store = assembler_.store();
  const data::ShardedDataset& ds = store.dataset();
  const LoaderOptions& opt = assembler_.options();
  const std::size_t rs = store.record_size(), bs = opt.batch_size, depth = opt.workers;
  const std::size_t nb = plan_.batches();
  Throttle& throttle = store.throttle();
  const bool throttled = throttle.model().active();

  // Batch slots: enough for `prefetch` finished batches plus the ones `depth` reads span.
  const std::size_t slots =
      std::max<std::size_t>(1, std::min(nb, opt.prefetch + 1 + (depth + bs - 1) / bs));
  AlignedBuffer arena(slots * bs * rs);  // declared before the ring: outlives it
  Ring ring(static_cast<unsigned>(2 * depth));
  std::vector<iovec> iov(slots);
  for (std::size_t s = 0; s < slots; ++s) iov[s] = {arena.data() + s * bs * rs, bs * rs};
  try {
    ring.register_buffers(iov);
    fixed_ = true;
  } catch (const std::system_error&) {
    fixed_ = false;  // pinning refused (RLIMIT_MEMLOCK): plain reads work as well
  }

  struct Slot {
    std::size_t batch = 0, records = 0, issued = 0, remaining = 0;
  };
  std::vector<Slot> slot(slots);
  std::vector<std::uint8_t> pending(slots * bs, 0);  // completions a record still waits for
  std::vector<std::uint32_t> got(slots * bs, 0);     // bytes of each record read so far
  std::vector<__kernel_timespec> when(slots * bs);   // timer deadlines; read at submission
  std::deque<std::size_t> fifo;                      // slots in batch order
  std::vector<std::size_t> free_slots;
  for (std::size_t s = slots; s-- > 0;) free_slots.push_back(s);
  std::size_t next_batch = 0, in_flight = 0;
  std::exception_ptr error;
  io_uring* r = ring.get();

  auto sqe = [&] {
    io_uring_sqe* e = io_uring_get_sqe(r);
    if (e == nullptr) {  // full: hand what is queued to the kernel, then there is room
      io_uring_submit(r);
      e = io_uring_get_sqe(r);
    }
    if (e == nullptr) throw std::runtime_error("io_uring: no submission queue entry");
    return e;
  };
  auto prep_read = [&](std::size_t s, std::size_t k) {
    const std::uint64_t id = plan_.batch(slot[s].batch)[k];
    const data::RecordLocation loc = ds.locate(id);
    std::byte* dst = arena.data() + (s * bs + k) * rs + got[s * bs + k];
    const unsigned len = static_cast<unsigned>(rs - got[s * bs + k]);
    const std::uint64_t off = loc.offset + got[s * bs + k];
    io_uring_sqe* e = sqe();
    if (fixed_)
      io_uring_prep_read_fixed(e, ds.fd(loc.shard), dst, len, off, static_cast<int>(s));
    else
      io_uring_prep_read(e, ds.fd(loc.shard), dst, len, off);
    io_uring_sqe_set_data64(e, tag(s, k, false));
  };
  auto issue = [&](std::size_t s, std::size_t k) {
    store.count_reads(1);
    got[s * bs + k] = 0;
    pending[s * bs + k] = 1;
    prep_read(s, k);
    if (throttled) {
      // The simulated device time: a timer to the throttle's completion time, in flight beside
      // the read. Nobody sleeps; the ring thread goes on submitting.
      when[s * bs + k] = to_timespec(throttle.admit(rs));
      io_uring_sqe* e = sqe();
      io_uring_prep_timeout(e, &when[s * bs + k], 0, IORING_TIMEOUT_ABS);
      io_uring_sqe_set_data64(e, tag(s, k, true));
      pending[s * bs + k] = 2;
    }
    ++in_flight;
  };
  // Collect completions; with `draining`, only count them down (nothing new is issued).
  auto reap = [&](bool draining) {
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    std::vector<std::pair<std::size_t, std::size_t>> again;
    io_uring_for_each_cqe(r, head, cqe) {
      ++seen;
      const std::uint64_t t = io_uring_cqe_get_data64(cqe);
      const std::size_t s = t >> 33, k = (t >> 1) & 0xFFFFFFFFu;
      const bool timer = (t & 1u) != 0;
      const std::size_t i = s * bs + k;
      if (!timer) {
        const int res = cqe->res;
        const std::uint64_t id = plan_.batch(slot[s].batch)[k];
        if (res < 0 && !draining && !error) {
          error = std::make_exception_ptr(data::DataError(
              store.shard_path(id), store.offset(id) + got[i],
              fmt::format("record {}: io_uring read: {}", id, std::strerror(-res))));
        } else if (res == 0 && got[i] < rs && !draining && !error) {
          error = std::make_exception_ptr(
              data::DataError(store.shard_path(id), store.offset(id) + got[i],
                              fmt::format("record {}: the file ends inside it", id)));
        } else if (res > 0) {
          got[i] += static_cast<std::uint32_t>(res);
          if (got[i] < rs && !draining && !error) {
            again.emplace_back(s, k);  // short read: the rest, once the CQ is released
            continue;
          }
        }
      }
      if (--pending[i] == 0) {
        --in_flight;
        --slot[s].remaining;
      }
    }
    io_uring_cq_advance(r, seen);
    for (auto [s, k] : again) prep_read(s, k);
  };
  auto wait_some = [&] {
    const int res = io_uring_submit_and_wait(r, 1);
    if (res < 0 && res != -EINTR)
      throw std::system_error(-res, std::generic_category(), "io_uring_submit_and_wait");
  };
  // Never leave while the kernel may still write into the arena or read a deadline.
  auto drain = [&] {
    while (in_flight > 0) {
      wait_some();
      reap(true);
    }
  };

  try {
    while (true) {
      // Give free slots the next batches, then fill the ring up to `depth` records, oldest
      // batch first.
      while (!free_slots.empty() && next_batch < nb) {
        const std::size_t s = free_slots.back();
        free_slots.pop_back();
        const std::size_t n = plan_.batch(next_batch).size();
        slot[s] = {next_batch++, n, 0, n};
        fifo.push_back(s);
      }
      for (std::size_t s : fifo)
        while (slot[s].issued < slot[s].records && in_flight < depth) issue(s, slot[s].issued++);
      if (in_flight > 0) {
        wait_some();
        reap(false);
      }
      if (error) std::rethrow_exception(error);
      // Deliver finished batches in order; put() blocks while the consumer is behind.
      while (!fifo.empty() && slot[fifo.front()].remaining == 0 &&
             slot[fifo.front()].issued == slot[fifo.front()].records) {
        const std::size_t s = fifo.front();
        Batch batch = assembler_.decode(
            plan_, slot[s].batch,
            std::span<const std::byte>(arena.data() + s * bs * rs, slot[s].records * rs));
        fifo.pop_front();
        free_slots.push_back(s);
        if (!queue_->put(batch.index, std::move(batch))) {
          drain();
          return;  // closed by stop()
        }
      }
      if (fifo.empty() && next_batch >= nb) break;
      if (st.stop_requested()) {
        drain();
        return;
      }
    }
  } catch (...) {
    try {
      drain();
    } catch (...) {
    }
    throw;
  }
  queue_->finish();
}

std::unique_ptr<Loader> make_uring_loader(const RecordStore& store, const LoaderOptions& opt) {
  return std::make_unique<UringLoader>(store, opt);
}

}  // namespace concurdl::async_io

#else

#include <stdexcept>

#include "concurdl/async_io/uring.hpp"

namespace concurdl::async_io {

std::unique_ptr<Loader> make_uring_loader(const RecordStore&, const LoaderOptions&) {
  std::string why;
  uring_available(&why);
  throw std::runtime_error(why);
}

}  // namespace concurdl::async_io

#endif
