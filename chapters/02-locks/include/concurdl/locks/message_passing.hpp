// Message passing vs shared memory: the same job done both ways. P producer threads generate
// items (say, the labels of samples a data loader has decoded) and a 64-bin histogram of them
// must be kept. Run: concurdl run ch02/message_passing.
//
//   v1_shared_state      every producer locks one mutex and updates the shared histogram:
//                        "communicate by sharing memory"
//   v2_channel           producers send each item through a BoundedBlockingQueue to one owner
//                        thread, the only one that touches the histogram: "share memory by
//                        communicating" (Go's motto, the actor model, MPI ranks)
//   v3_channel_batched   the same, items sent in batches of 256: one queue operation per batch
//
// The lesson is in the per-item cost: a channel operation is a lock plus a possible wake-up,
// more than the lock alone, so per-item messages lose; batching amortises the channel and wins,
// and the owner thread needs no lock at all for its state. (Data loaders send batches, not
// samples, for exactly this reason.)
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/locks/blocking_queue.hpp"
#include "concurdl/locks/lock_variants.hpp"

namespace concurdl::locks {

inline constexpr std::size_t kHistogramBins = 64;
using Histogram = std::array<std::uint64_t, kHistogramBins>;

// Item i of producer p: a hash, so bins fill unevenly but deterministically.
inline std::uint64_t produced_item(unsigned producer, std::uint64_t i) {
  std::uint64_t x = (static_cast<std::uint64_t>(producer) << 40) ^ (i + 1);
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}
inline std::size_t bin_of(std::uint64_t item) { return item % kHistogramBins; }

// The reference every variant must match.
inline Histogram serial_histogram(unsigned producers, std::uint64_t per_producer) {
  Histogram h{};
  for (unsigned p = 0; p < producers; ++p)
    for (std::uint64_t i = 0; i < per_producer; ++i) ++h[bin_of(produced_item(p, i))];
  return h;
}

namespace detail {

template <class Body>
void run_producers(unsigned producers, Body body) {
  StartGate gate;
  std::vector<std::jthread> team;
  for (unsigned p = 0; p < producers; ++p)
    team.emplace_back([&, p] {
      gate.arrive_and_wait();
      body(p);
    });
  gate.open_when(producers);
}

}  // namespace detail

inline Histogram histogram_shared_state(unsigned producers, std::uint64_t per_producer) {
  Histogram h{};
  std::mutex mu;
  detail::run_producers(producers, [&](unsigned p) {
    for (std::uint64_t i = 0; i < per_producer; ++i) {
      const std::size_t b = bin_of(produced_item(p, i));
      std::lock_guard lock(mu);
      ++h[b];
    }
  });
  return h;
}

inline Histogram histogram_channel(unsigned producers, std::uint64_t per_producer) {
  BoundedBlockingQueue<std::uint64_t> channel(1024);
  Histogram h{};
  std::jthread owner([&] {
    while (std::optional<std::uint64_t> item = channel.pop()) ++h[bin_of(*item)];
  });
  detail::run_producers(producers, [&](unsigned p) {
    for (std::uint64_t i = 0; i < per_producer; ++i) channel.push(produced_item(p, i));
  });
  channel.close();  // the owner drains what is left, then pop() says the stream has ended
  owner.join();
  return h;
}

inline constexpr std::size_t kMessageBatch = 256;

inline Histogram histogram_channel_batched(unsigned producers, std::uint64_t per_producer) {
  BoundedBlockingQueue<std::vector<std::uint64_t>> channel(64);
  Histogram h{};
  std::jthread owner([&] {
    while (std::optional<std::vector<std::uint64_t>> batch = channel.pop())
      for (std::uint64_t item : *batch) ++h[bin_of(item)];
  });
  detail::run_producers(producers, [&](unsigned p) {
    std::vector<std::uint64_t> batch;
    batch.reserve(kMessageBatch);
    for (std::uint64_t i = 0; i < per_producer; ++i) {
      batch.push_back(produced_item(p, i));
      if (batch.size() == kMessageBatch) {
        channel.push(std::move(batch));
        batch = {};
        batch.reserve(kMessageBatch);
      }
    }
    if (!batch.empty()) channel.push(std::move(batch));
  });
  channel.close();
  owner.join();
  return h;
}

struct MessagePassingVariant : VariantInfo {
  Histogram (*run)(unsigned producers, std::uint64_t per_producer);
};

inline constexpr MessagePassingVariant kMessagePassingRows[] = {
    {{"v1_shared_state", "producers lock one mutex and update the shared histogram per item"},
     &histogram_shared_state},
    {{"v2_channel", "producers send every item through a blocking queue to one owner thread"},
     &histogram_channel},
    {{"v3_channel_batched", "the same channel, 256 items per message: the queue cost amortised"},
     &histogram_channel_batched},
};
inline constexpr VariantTable kMessagePassingVariants{kMessagePassingRows};

}  // namespace concurdl::locks
