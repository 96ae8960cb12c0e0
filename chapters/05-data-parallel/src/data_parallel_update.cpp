// DataParallelTrainer's update paths besides the replicated one (data_parallel.hpp): fused into
// the weight-gradient GEMMs at one rank (fuse_update_alone), and sharded between the ring's
// halves at more (shard_update), with the gathering of the state it leaves stale.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "concurdl/core/clock.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/allreduce16.hpp"
#include "concurdl/dp/data_parallel.hpp"

namespace concurdl::dp {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

bool DataParallelTrainer::fused_step(std::size_t rows, RankStepResult& r) {
  trace::Span compute("forward + backward + update", "compute");
  const nn::Precision p = config_.precision;
  if (p == nn::Precision::fp32) {
    const float loss = model_.train_step(batch_x_.data(), batch_y_.data(), rows, opt_, &r.correct);
    r.loss_sum = static_cast<double>(loss) * static_cast<double>(rows);
    return true;
  }
  // The loss scaler decides from the 16-bit output gradients whether the update is applied.
  const bool fp16 = p == nn::Precision::fp16;
  const nn::Mlp::MixedStep m = model_.train_step_mixed(
      p, batch_x16_.data(), batch_y_.data(), rows, fp16 ? scaler_.scale() : 1.0f, opt_,
      [&](bool finite) { return fp16 ? scaler_.update(!finite) : finite; }, &r.correct);
  r.loss_sum = static_cast<double>(m.loss) * static_cast<double>(rows);
  return m.applied;
}

Block DataParallelTrainer::owned_block() const {
  const std::size_t n = model_.parameters().size();
  // Whichever block the ring's reduce-scatter leaves summed here: block r of the float32 ring,
  // block r + 1 of the 16-bit one.
  if (config_.precision == nn::Precision::fp32) return block_of(n, size(), rank());
  return block_16bit(n, size(), (rank() + 1) % size());
}

void DataParallelTrainer::sharded_update_fp32() {
  const Block mine = owned_block();
  {
    trace::Span update("sgd (own block)", "update");
    opt_.step_range(model_.parameters(), model_.gradients(), mine.offset, mine.count);
  }
  trace::Span gather("all-gather parameters", "comm");
  const auto t0 = Clock::now();
  all_gather_ring(comm_, model_.parameters(), options_.algo);
  times_.wait_s += seconds_since(t0);
  times_.reduce_s += seconds_since(t0);
  shards_stale_ = true;  // the momentum outside this rank's block
}

std::vector<Block> DataParallelTrainer::bias_ranges() const {
  const std::vector<std::size_t>& off = model_.layer_offsets();
  std::vector<Block> out;
  for (std::size_t l = 0; l + 1 < off.size(); ++l)
    out.push_back({off[l + 1] - config_.spec.widths[l + 1], config_.spec.widths[l + 1]});
  return out;
}

bool DataParallelTrainer::share_verdict_and_biases(std::span<std::uint16_t> g, Block mine) {
  // One all-reduce of [this block's overflow verdict, every bias gradient]: each rank puts its
  // block's summed bias gradients, widened (exact), and -0 elsewhere, which adds nothing to any
  // float (+0 and -0 included); the sum is every bias's summed gradient, on every rank, rounded
  // back to its own 16 bits exactly. The biases are then updated by every rank
  // (sharded_update_16bit), as the next step reads their float32 values.
  const nn::Precision p = config_.precision;
  const std::vector<Block> biases = bias_ranges();
  const auto owned = [&](std::size_t i) {
    return i >= mine.offset && i < mine.offset + mine.count;
  };
  bias_sum_.assign(1, nn::all_finite_16bit(p, g.subspan(mine.offset, mine.count)) ? 0.0f : 1.0f);
  float wide = 0;
  for (const Block& b : biases)
    for (std::size_t i = b.offset; i < b.offset + b.count; ++i) {
      if (owned(i)) nn::from_16bit(p, g.subspan(i, 1), {&wide, 1});
      bias_sum_.push_back(owned(i) ? wide : -0.0f);
    }
  if (size() > 1) {
    trace::Span share("all-reduce verdict and biases", "comm");
    comm_.all_reduce(bias_sum_);
  }
  std::size_t k = 1;
  for (const Block& b : biases)
    for (std::size_t i = b.offset; i < b.offset + b.count; ++i, ++k)
      if (!owned(i)) nn::to_16bit(p, {&bias_sum_[k], 1}, g.subspan(i, 1));
  return bias_sum_[0] != 0;
}

void DataParallelTrainer::sharded_update_16bit() {
  const Block mine = owned_block();
  const nn::Mlp::MixedUpdate to = model_.mixed_update(config_.precision);
  {
    trace::Span update("sgd (own block, all biases)", "update");
    opt_.step_16bit_range(to.params, grads16_, config_.precision, mixed_scale_, to.params16,
                          mine.offset, mine.count);
    // The next step adds the biases in float32 (Mlp::forward_backward_mixed reads their master
    // values): every rank updates the biases outside its block too, from the sums
    // share_verdict_and_biases left in grads16_. Same inputs, same bits as their owner's; their
    // momentum stays the same on every rank.
    const std::size_t me = mine.offset, my_end = mine.offset + mine.count;
    for (const Block& b : bias_ranges()) {
      const std::size_t end = b.offset + b.count;
      if (b.offset < me)
        opt_.step_16bit_range(to.params, grads16_, config_.precision, mixed_scale_, to.params16,
                              b.offset, std::min(end, me) - b.offset);
      if (end > my_end) {
        const std::size_t from = std::max(b.offset, my_end);
        opt_.step_16bit_range(to.params, grads16_, config_.precision, mixed_scale_, to.params16,
                              from, end - from);
      }
    }
  }
  // Every block's 16-bit rounding from its owner: the whole working copy the next step reads.
  trace::Span gather("16-bit all-gather parameters", "comm");
  const auto t0 = Clock::now();
  all_gather_ring_16bit(comm_, to.params16, options_.algo);
  times_.wait_s += seconds_since(t0);
  times_.reduce_s += seconds_since(t0);
  shards_stale_ = true;  // the master weights (but biases) and momentum outside this block
}

void DataParallelTrainer::gather_shards() {
  if (!sharded()) return;
  // Every rank knows whether a sharded update ran (they all take the same steps), so all skip
  // or all gather.
  if (!shards_stale_) return;
  trace::Span gather("gather shards", "comm");
  std::span<float> velocity = opt_.velocity();
  const std::size_t n = velocity.size();
  if (config_.precision == nn::Precision::fp32) {
    all_gather_ring(comm_, velocity, options_.algo);  // the parameters were gathered each step
  } else {
    std::span<float> params = model_.parameters();
    for (int q = 0; q < size(); ++q) {
      const Block b = block_16bit(n, size(), (q + 1) % size());
      comm_.broadcast(params.subspan(b.offset, b.count), q);
      comm_.broadcast(velocity.subspan(b.offset, b.count), q);
    }
  }
  shards_stale_ = false;
}

}  // namespace concurdl::dp
