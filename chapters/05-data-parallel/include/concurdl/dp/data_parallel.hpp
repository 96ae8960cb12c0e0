// Data-parallel SGD, as PyTorch DDP and Horovod do it, on the MLP of kernels/nn:
//
//              global batch s (ranks x b rows of the epoch's permutation)
//        ┌──────────────┬──────────────┬──────────────┐
//        rank 0: rows   rank 1: rows   rank 2: rows      each rank: its own replica
//        forward        forward        forward           (same seed: same initial weights)
//        backward ──┐   backward ──┐   backward ──┐      layer L-1 finishes first ...
//        │ buckets  │   │          │   │          │
//        └──────────┴── all-reduce bucket by bucket ──┘  (blocking after backward, or
//        SGD step       SGD step       SGD step           overlapped with it)
//                                                          every replica takes the same step
//
// Each rank scales its gradient by 1 / (the global batch's rows) before the all-reduce (the
// loss head's total_rows), so the sum over ranks is exactly the gradient of the global batch's
// mean loss, also when the last batch of an epoch does not divide by the ranks. So N ranks with
// per-rank batch b take the steps one rank takes with batch N·b, on the same samples in the
// same order (the permutation of (seed, epoch), as nn::Trainer draws it), up to the order of
// float additions: the tests hold them to it.
//
// Gradients are all-reduced in buckets: consecutive layers, from the last layer down (the
// order backward finishes them), merged until a bucket holds at least bucket_bytes (PyTorch's
// bucket_cap_mb, 25 MB there; this MLP's gradients are 0.94 MB: 5 KB, 132 KB and 804 KB for
// its three layers, so the default 128 KiB makes two buckets, {layers 2, 1} and {layer 0}).
// Fewer, larger buckets pay the per-message cost (α) fewer times; more, smaller ones can start
// sooner. The GradientSync does the all-reduce:
//   BlockingSync  after backward, every bucket in turn (nothing overlaps);
//   OverlapSync   a communication thread per rank all-reduces each bucket as soon as
//                 backward_layers' on_layer_done hook says its last layer is done, while the
//                 compute thread goes on with the layers below; finish_step waits for all.
// What overlap can hide is bounded by the compute left after a bucket is ready: the first layer
// (784 x 256, 85% of the bytes) finishes last, so most of the traffic cannot overlap here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::dp {

inline constexpr std::size_t kDefaultBucketBytes = std::size_t{128} << 10;

// A bucket: layers [first_layer, last_layer) and their gradients, floats [offset, offset+count)
// of the flat buffer.
struct GradBucket {
  std::size_t first_layer = 0, last_layer = 0;
  std::size_t offset = 0, count = 0;
  bool operator==(const GradBucket&) const = default;
};

// Buckets in the order backward finishes them (the last layer's first), from the model's
// layer_offsets() (layers + 1 entries). Each bucket is closed once it holds >= bucket_bytes;
// bucket_bytes 0: one bucket per layer. The buckets cover every layer exactly once.
std::vector<GradBucket> plan_buckets(std::span<const std::size_t> layer_offsets,
                                     std::size_t bucket_bytes);

// How a data-parallel step makes every rank's gradients the sum over the ranks. The trainer
// calls, per step, on its compute thread: begin_step(); layer_done(l) for l = layers-1 down to
// 0 as backward finishes each layer; finish_step(), which returns once every bucket holds the
// sum (and rethrows a failure of the all-reduce). reduce(b) all-reduces one bucket in place with
// the chosen algorithm and counts its time; implementations decide when and on which thread
// it runs. Every rank must reduce the same buckets in the same order (collectives match by
// order).
// How one bucket of a buffer laid out as the layer offsets say becomes the sum over the ranks:
// the float32 gradients with an all-reduce algorithm, or mixed precision's 16-bit ones with
// allreduce_ring_16bit.
using BucketReduce = std::function<void(Communicator&, const GradBucket&)>;

class GradientSync {
 public:
  GradientSync(Communicator& comm, std::span<float> gradients,
               std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
               AllReduceFn algorithm, AlgoOptions algo = {});
  // Over any buffer: reduce_bucket(comm, b) sums bucket b in place. bucket_bytes counts 4 bytes
  // a value, as plan_buckets does.
  GradientSync(Communicator& comm, std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
               BucketReduce reduce_bucket);
  virtual ~GradientSync() = default;
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  virtual void begin_step() = 0;
  virtual void layer_done(std::size_t layer) = 0;
  virtual void finish_step() = 0;

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Seconds spent inside reduce() since construction (on whichever thread ran it).
  double reduce_seconds() const { return reduce_ns_.load(std::memory_order_relaxed) * 1e-9; }

 protected:
  void reduce(const GradBucket& b);  // thread-safe against the compute thread, not against itself
  // The bucket that layer l belongs to (index into buckets()).
  std::size_t bucket_of(std::size_t layer) const { return bucket_of_[layer]; }
  Communicator& comm() { return comm_; }
  std::size_t layers() const { return layer_offsets_.size() - 1; }
  const std::vector<std::size_t>& layer_offsets() const { return layer_offsets_; }

 private:
  Communicator& comm_;
  std::vector<std::size_t> layer_offsets_;
  std::vector<GradBucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  BucketReduce reduce_bucket_;
  std::atomic<long long> reduce_ns_{0};
};

// After backward, every bucket in turn, on the compute thread.
class BlockingSync final : public GradientSync {
 public:
  using GradientSync::GradientSync;
  void begin_step() override {}
  void layer_done(std::size_t) override {}
  void finish_step() override;
};

// A communication thread all-reduces each bucket as soon as its layers are done.
class OverlapSync final : public GradientSync {
 public:
  OverlapSync(Communicator& comm, std::span<float> gradients,
              std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
              AllReduceFn algorithm, AlgoOptions algo = {});
  OverlapSync(Communicator& comm, std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
              BucketReduce reduce_bucket);
  ~OverlapSync() override;  // stops the thread after the bucket it may be reducing
  void begin_step() override;
  void layer_done(std::size_t layer) override;
  void finish_step() override;

 private:
  void start();
  void worker();
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::size_t> ready_;         // buckets to reduce, in order
  std::vector<std::size_t> layers_left_;  // per bucket, layers of this step not yet done
  std::size_t reduced_ = 0;               // buckets of this step reduced
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the rest is in place
};

// Which synchroniser a trainer builds (exercise 5.2 plugs the student's in here).
using SyncFactory = std::function<std::unique_ptr<GradientSync>(
    Communicator&, std::span<float> gradients, std::vector<std::size_t> layer_offsets,
    std::size_t bucket_bytes, AllReduceFn, AlgoOptions)>;

struct DataParallelOptions {
  std::size_t bucket_bytes = kDefaultBucketBytes;  // 0: one bucket per layer
  bool overlap = false;
  std::string algorithm = "native";  // a row of kAllReduceVariants
  AlgoOptions algo;
  SyncFactory make_sync;  // empty: OverlapSync when overlap, else BlockingSync
  // Called on each rank after its step's compute (forward and backward), before it waits for
  // the all-reduce, with its rank and the compute's seconds: chapter 07's stragglers sleep here
  // (nn::straggle), so the others wait for them at the all-reduce.
  std::function<void(int rank, double compute_s)> after_compute;
  // fp16's loss-scale update (exercise 5.4 plugs the student's in here).
  nn::LossScaleUpdate loss_scale_update = &nn::update_loss_scale;
  // At one rank, where there is nothing to sum, each weight matrix's update fused into the GEMM
  // that computes its gradient (Mlp::train_step, Mlp::train_step_mixed), as nn::Trainer steps:
  // the fastest step one rank can take. Ignored at more ranks, where the update must wait for
  // the summed gradient. Off, one rank takes the step a rank of many does, with nobody to talk
  // to (what ch05/dp_train's scaling and projection start from). In float32 the same bits either
  // way; in 16 bits the fused step keeps the weight gradients in float32 (nn::TrainConfig's
  // fuse_update). Fused, StepTimes counts the update in compute_s (update_s stays 0).
  bool fuse_update_alone = false;
  // At more than one rank, the update sharded as ZeRO stage 1 shards it (zero.hpp; Rajbhandari
  // et al., SC 2020), for its work rather than its memory: the gradients are reduce-scattered,
  // each rank updates only the block it holds summed (its momentum and master weights), and the
  // updated parameters are all-gathered (in 16-bit precision their 16-bit copy, which the next
  // step multiplies with). The same bytes on the wire as the all-reduce, and the same bits as
  // the replicated update; each rank's update reads and writes 1/N of the optimizer's state.
  // Between gathers a rank's momentum (and, in 16 bits, its master weights) outside its block
  // are stale: run_epoch gathers them at its end; after steps taken with step(), gather_shards()
  // does (save refuses stale state, evaluate stale master weights). Float32 takes the ring's two
  // halves (reduce_scatter_ring, all_gather_ring: algorithm must be v4_ring), 16 bits the 16-bit
  // ring's; after backward only (no overlap, no make_sync).
  bool shard_update = false;
};

// One rank's share of one global step: its rows, and the sum of its rows' losses.
struct RankStepResult {
  std::size_t rows = 0, global_rows = 0, correct = 0;
  double loss_sum = 0;
  bool skipped = false;  // mixed precision: the summed gradients were not finite, no update
};

// The epoch loop of the data-parallel trainers (plain and ZeRO): `steps` calls of step(); at
// every report_every-th step and the last, the window's loss, correct and rows summed over the
// ranks (every rank reports at the same steps, whether or not it has an on_progress:
// collectives match by order), and on_progress called with them. `epoch` and `step_count` (the
// trainer's step counter) fill the progress; `samples` is the epoch's.
nn::EpochResult run_rank_epoch(Communicator& comm, std::size_t steps, std::size_t samples,
                               std::uint64_t epoch, const std::function<RankStepResult()>& step,
                               const std::function<std::uint64_t()>& step_count,
                               const std::function<void(const nn::StepProgress&)>& on_progress,
                               std::size_t report_every);

// Seconds spent in each part of the steps since the last reset_times(), on this rank.
struct StepTimes {
  std::size_t steps = 0;
  double compute_s = 0;  // gathering the batch, forward and backward (with overlap, the
                         // all-reduce of finished buckets runs during this)
  double wait_s = 0;     // communication left exposed after backward (finish_step, or the
                         // 16-bit ring after backward)
  double reduce_s = 0;   // inside the all-reduce calls, on whichever thread (busy time)
  double update_s = 0;   // the SGD step
  double total_s = 0;    // whole steps
};

// One rank of data-parallel training. Every rank of `comm` constructs one with the same
// config (config.batch is the per-rank batch) and the same data set, and calls the same
// methods in the same order. With config.precision bf16 or fp16 each rank's step is
// Mlp::forward_backward_mixed and the 16-bit gradients are summed with allreduce_ring_16bit:
// the whole buffer after backward, or with overlap bucket by bucket (bucket_bytes of 16-bit
// values) on the communication thread as backward hands each layer over; another algorithm or
// make_sync is refused.
class DataParallelTrainer final : public nn::RankTrainer {
 public:
  DataParallelTrainer(Communicator& comm, nn::TrainConfig config, const nn::Dataset& train,
                      DataParallelOptions options = {});

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  std::size_t global_batch() const { return config_.batch * static_cast<std::size_t>(size()); }
  std::size_t steps_per_epoch() const;

  // One global step (the next batch of the epoch; a new epoch starts after the last). Returns
  // this rank's share: its rows and the sum of its rows' losses.
  using StepResult = RankStepResult;
  StepResult step();

  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress = {},
                            std::size_t report_every = 50) override;
  nn::EvalResult evaluate(const nn::Dataset& d) override;
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;

  nn::Mlp& model() { return model_; }
  const nn::Mlp& model() const { return model_; }
  nn::Sgd& optimizer() { return opt_; }
  // fp16's dynamic loss scale (config.precision); at its start otherwise.
  const nn::LossScaler& loss_scaler() const { return scaler_; }
  std::map<std::string, double> epoch_metrics() const override;
  const GradientSync* sync() const { return sync_.get(); }
  const StepTimes& times() const { return times_; }
  void reset_times();
  std::size_t step_in_epoch() const { return step_in_epoch_; }
  // With options.shard_update: every rank's momentum (and in 16 bits its master weights) made
  // whole again from the blocks' owners. Collective: every rank calls it. Nothing to do (and no
  // communication) when nothing is stale.
  void gather_shards();
  bool sharded() const { return options_.shard_update && size() > 1; }

 private:
  void start_epoch();
  // A step taken: the step and epoch counters, and the steps StepTimes counts.
  void count_step();
  // The mixed-precision step's compute and all-reduce (config.precision bf16 or fp16): the
  // 16-bit gradients summed over the ranks in 16 bits (allreduce_ring_16bit), checked, unscaled.
  // Whether to apply the update.
  bool mixed_compute_and_reduce(std::size_t rows, RankStepResult& r);
  // One rank's whole step with the update fused (options.fuse_update_alone): whether it was
  // applied.
  bool fused_step(std::size_t rows, RankStepResult& r);
  // The sharded update (options.shard_update), after the reduce-scatter: this rank's block,
  // then the all-gather of the parameters (fp32) or their 16-bit copy.
  void sharded_update_fp32();
  void sharded_update_16bit();
  // After the 16-bit reduce-scatter: whether any rank's block of `g` overflowed, agreed by one
  // all-reduce that also leaves every bias's summed gradient in `g` on every rank.
  bool share_verdict_and_biases(std::span<std::uint16_t> g, Block mine);
  // Where each layer's biases lie in the flat buffers.
  std::vector<Block> bias_ranges() const;
  // The block of the flat buffers this rank updates when sharded.
  Block owned_block() const;
  Communicator& comm_;
  nn::TrainConfig config_;
  const nn::Dataset& train_;
  DataParallelOptions options_;
  nn::Mlp model_;
  nn::Sgd opt_;
  nn::LossScaler scaler_;
  nn::TrainState state_;
  std::unique_ptr<GradientSync> sync_;  // null with one rank, or in 16-bit precision
  std::span<std::uint16_t> grads16_;    // the summed 16-bit gradients (the model's, or zeros16_)
  std::vector<std::uint16_t> zeros16_;  // a step's gradients on a rank without rows
  float mixed_scale_ = 1.0f;            // the loss scale the last mixed step ran with
  std::vector<std::uint32_t> order_;
  std::size_t step_in_epoch_ = 0;
  bool epoch_started_ = false;
  kernels::LineVector<float> batch_x_;            // float32's batch (aligned.hpp)
  kernels::LineVector<std::uint16_t> batch_x16_;  // a 16-bit step's (gather_batch_16bit)
  std::vector<float> dlogits_;
  std::vector<std::uint8_t> batch_y_;
  nn::Activations acts_;
  StepTimes times_;
  double reduce_base_ = 0;       // sync_->reduce_seconds() at the last reset_times()
  bool shards_stale_ = false;    // a sharded update ran since the last gather_shards()
  std::vector<float> bias_sum_;  // share_verdict_and_biases's verdict and bias gradients
};

// 0 when every rank's `values` equal rank 0's bit for bit; else a positive number (the sum over
// ranks of each rank's largest absolute difference from rank 0). Every rank must call it.
double replica_divergence(Communicator& comm, std::span<const float> values);

// The all-reduce row named `name` (kAllReduceVariants), or a UsageError listing them.
AllReduceFn find_allreduce(const std::string& name);

}  // namespace concurdl::dp
