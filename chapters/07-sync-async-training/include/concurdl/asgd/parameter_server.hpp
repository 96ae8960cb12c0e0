// The pieces asynchronous training is made of, each small enough to read in one sitting:
//
//   ParameterServer  holds the parameters and the optimiser's momentum; workers pull a copy
//                    (and the version it is) and push gradients, each applied at once as one
//                    SGD step. Sharded: each shard is a range of the parameters with its own
//                    lock, so pushes that touch different shards at the same moment proceed
//                    together (as ps-lite and TensorFlow's PS shard variables over servers).
//   SspClock         stale-synchronous parallel (Ho et al., 2013): worker w may start its step
//                    c only while c - (the slowest worker's clock) <= s; s = 0 is BSP-like
//                    lockstep, s = infinity is fully asynchronous.
//   StalenessLog     how many updates other workers applied between a worker's pull and its
//                    push: the "staleness" of that gradient, a histogram of every update.
//
//        worker 0 ──pull (v=7)──> compute gradient on params@7 ──push──┐
//        worker 1 ──pull (v=7)──> compute ──push──┐                    │
//                                                 v                    v
//        server   ........ v=7 ...... apply: v=8 (staleness 0) ... apply: v=9 (staleness 1)
//
// Threads: every method may be called from any number of threads at once.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/nn/sgd.hpp"

namespace concurdl::asgd {

// A histogram of staleness values: exact counts for 0..kExact-1, one bucket for the rest (their
// sum and maximum are kept exactly, so the mean and max are exact).
class StalenessLog {
 public:
  static constexpr std::size_t kExact = 64;
  void add(std::uint64_t staleness);
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  std::uint64_t max() const { return max_.load(std::memory_order_relaxed); }
  double mean() const;
  // Updates with staleness s, for s < kExact; bucket(kExact) counts everything larger.
  std::uint64_t bucket(std::size_t s) const;
  // The smallest s with at least fraction q of the updates at or below it.
  std::uint64_t quantile(double q) const;
  void reset();
  // The figures a record carries: staleness_mean, _p50, _p99, _max, updates, and the histogram
  // as the fraction of the updates at each staleness seen (staleness_hist_0, _1, ...; the
  // updates beyond kExact - 1 in staleness_hist_64plus).
  void add_to(std::map<std::string, double>& metrics) const;

 private:
  std::array<std::atomic<std::uint64_t>, kExact + 1> buckets_{};
  std::atomic<std::uint64_t> count_{0}, sum_{0}, max_{0};
};

class ParameterServer {
 public:
  // `initial` parameters, SGD with momentum (nn::Sgd's rule, applied shard by shard: with one
  // worker the server takes exactly the steps nn::Trainer takes), `shards` >= 1 ranges of
  // about equal size.
  ParameterServer(std::span<const float> initial, nn::SgdOptions sgd, int shards = 1);

  std::size_t size() const { return params_.size(); }
  int shards() const { return static_cast<int>(shards_.size()); }
  // Shard s's range of n parameters cut into `shards`: its first parameter and its count.
  static std::pair<std::size_t, std::size_t> shard_range(std::size_t n, int shards, int s);

  // Copies the parameters into `out` (size() floats) and returns the version they are at: the
  // number of pushes applied before the copy began. With several shards another push may land
  // in a later shard during the copy, so the copy is at least that version, shard by shard.
  std::uint64_t pull(std::span<float> out) const;
  // Applies `gradient` (size() floats) as one SGD step and returns its staleness: the pushes
  // applied since `version_seen` (the version its pull returned) by other workers.
  std::uint64_t push(std::span<const float> gradient, std::uint64_t version_seen);
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

  void set_lr(float lr);  // every shard, for the pushes that follow
  // The whole state, for checkpoints: parameters and momentum, shard after shard in order.
  void read_state(std::span<float> params, std::span<float> velocity) const;
  void write_state(std::span<const float> params, std::span<const float> velocity,
                   std::uint64_t version);

 private:
  struct Shard {
    std::size_t offset = 0, count = 0;
    mutable std::mutex m;
    std::unique_ptr<nn::Sgd> opt;  // its momentum, count floats
  };
  std::vector<float> params_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<std::uint64_t> version_{0};
};

// Stale-synchronous parallel: a clock per worker (the steps it has finished); a worker about
// to start a step waits while it is more than `bound` steps ahead of the slowest worker still
// running. A worker that leaves (its share of the epoch is done, or it failed) no longer holds
// the others back.
class SspClock {
 public:
  SspClock(int workers, std::uint64_t bound);
  // Blocks until worker w may start its next step; returns how far ahead of the slowest it was
  // when it started (<= bound, always: the tests check it on every call).
  std::uint64_t wait_turn(int w);
  void advance(int w);  // worker w finished a step
  void leave(int w);    // worker w will take no more steps
  std::uint64_t bound() const { return bound_; }
  std::uint64_t clock(int w) const;
  std::uint64_t max_lead() const;  // the largest lead any wait_turn returned
  std::uint64_t waits() const;     // how many wait_turn calls had to sleep

 private:
  std::uint64_t slowest_locked() const;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> clock_;
  std::vector<bool> active_;
  std::uint64_t bound_, max_lead_ = 0, waits_ = 0;
};

}  // namespace concurdl::asgd
