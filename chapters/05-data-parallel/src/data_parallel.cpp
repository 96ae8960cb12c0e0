// Data-parallel SGD (data_parallel.hpp): one rank's trainer, its epoch loop and the replicas'
// divergence (gradient_sync.cpp: bucket plans and the blocking and overlapped all-reduce;
// data_parallel_update.cpp: the update fused at one rank and sharded at more).
#include "concurdl/dp/data_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "concurdl/core/clock.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/dp/allreduce16.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::dp {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

// --- the trainer -----------------------------------------------------------------------------

DataParallelTrainer::DataParallelTrainer(Communicator& comm, nn::TrainConfig config,
                                         const nn::Dataset& train, DataParallelOptions options)
    : comm_(comm),
      config_(std::move(config)),
      train_(train),
      options_(std::move(options)),
      model_(config_.spec, config_.seed, config_.gemm),
      opt_(model_.parameters().size(), config_.sgd),
      scaler_(config_.loss_scaler, options_.loss_scale_update) {
  if (config_.batch == 0) throw std::invalid_argument("DataParallelTrainer: batch size 0");
  const bool mixed = config_.precision != nn::Precision::fp32;
  if (mixed && (options_.make_sync || options_.algorithm != "native" ||
                (!options_.overlap && options_.bucket_bytes != kDefaultBucketBytes)))
    throw std::invalid_argument(
        "DataParallelTrainer: 16-bit precision sums its gradients with the 16-bit ring (after "
        "backward on the whole buffer, or bucket by bucket with overlap): no other all-reduce "
        "or synchroniser, and buckets only with overlap");
  if (comm_.memory() != MemorySpace::host)
    throw UsageError(fmt::format(
        "data-parallel training: the {} backend all-reduces device memory; this trainer runs "
        "the MLP on the CPU (host memory)",
        comm_.name()));
  if (train_.dim != config_.spec.widths.front() || train_.classes > config_.spec.widths.back() ||
      train_.x.size() != train_.n * train_.dim || train_.y.size() != train_.n ||
      (!train_.pixels.empty() && train_.pixels.size() != train_.x.size()))
    throw std::invalid_argument("DataParallelTrainer: the data set does not fit the model " +
                                config_.spec.describe());
  if (options_.shard_update && comm_.size() > 1 &&
      (options_.overlap || options_.make_sync || (!mixed && options_.algorithm != "v4_ring")))
    throw std::invalid_argument(
        "DataParallelTrainer: the sharded update runs after backward between the ring's two "
        "halves (float32: algorithm v4_ring; 16 bits: the 16-bit ring): no overlap, no other "
        "all-reduce or synchroniser");
  const AllReduceFn algo = find_allreduce(options_.algorithm);
  if (sharded()) {
    // No synchroniser: step() runs the ring's halves around the update itself.
  } else if (comm_.size() > 1 && mixed && options_.overlap) {
    // Bucket by bucket on the communication thread, each in place in the 16-bit buffer the step
    // hands over (grads16_, set on the compute thread before a bucket's first layer is done).
    // bucket_bytes are of 16-bit values, 2 bytes each; plan_buckets counts 4 bytes a value.
    sync_ = std::make_unique<OverlapSync>(comm_, model_.layer_offsets(), 2 * options_.bucket_bytes,
                                          [this](Communicator& c, const GradBucket& b) {
                                            allreduce_ring_16bit(
                                                c, config_.precision,
                                                grads16_.subspan(b.offset, b.count), options_.algo);
                                          });
  }
  if (comm_.size() > 1 && !mixed && !sharded()) {
    std::vector<std::size_t> offsets = model_.layer_offsets();
    if (options_.make_sync)
      sync_ = options_.make_sync(comm_, model_.gradients(), std::move(offsets),
                                 options_.bucket_bytes, algo, options_.algo);
    else if (options_.overlap)
      sync_ = std::make_unique<OverlapSync>(comm_, model_.gradients(), std::move(offsets),
                                            options_.bucket_bytes, algo, options_.algo);
    else
      sync_ = std::make_unique<BlockingSync>(comm_, model_.gradients(), std::move(offsets),
                                             options_.bucket_bytes, algo, options_.algo);
  }
  state_.seed = config_.seed;
  state_.mode = "sync";
  state_.workers = static_cast<std::uint64_t>(size());
}

std::size_t DataParallelTrainer::steps_per_epoch() const {
  return (train_.n + global_batch() - 1) / global_batch();
}

std::string DataParallelTrainer::describe() const {
  if (options_.fuse_update_alone && size() == 1)
    return fmt::format(
        "1 rank ({}), batch {}, {}, nothing to sum: the update fused into the "
        "weight-gradient GEMMs",
        comm_.name(), config_.batch, nn::describe(config_.precision));
  if (sharded())
    return fmt::format(
        "{} ranks ({}), batch {} per rank ({} global), {}, update sharded: gradients "
        "reduce-scattered by the {} ring, each rank updates its block, parameters all-gathered",
        size(), comm_.name(), config_.batch, global_batch(), nn::describe(config_.precision),
        config_.precision == nn::Precision::fp32 ? "float32" : "16-bit");
  if (config_.precision != nn::Precision::fp32) {
    const std::string how =
        sync_ ? fmt::format("in {} bucket{} of >= {} KiB, overlapped with backward",
                            sync_->buckets().size(), sync_->buckets().size() == 1 ? "" : "s",
                            options_.bucket_bytes >> 10)
              : std::string("after backward");
    return fmt::format(
        "{} rank{} ({}), batch {} per rank ({} global), {} gradients summed by the 16-bit ring {}",
        size(), size() == 1 ? "" : "s", comm_.name(), config_.batch, global_batch(),
        nn::describe(config_.precision), how);
  }
  const std::size_t buckets = sync_ ? sync_->buckets().size() : 0;
  return fmt::format(
      "{} rank{} ({}), batch {} per rank ({} global), all-reduce {} in {} bucket{} of >= {} "
      "KiB, overlap {}",
      size(), size() == 1 ? "" : "s", comm_.name(), config_.batch, global_batch(),
      options_.algorithm, buckets, buckets == 1 ? "" : "s", options_.bucket_bytes >> 10,
      options_.overlap ? "on" : "off");
}

void DataParallelTrainer::reset_times() {
  times_ = {};
  reduce_base_ = sync_ ? sync_->reduce_seconds() : 0.0;
}

void DataParallelTrainer::start_epoch() {
  if (config_.lr_decay != 1.0f) opt_.set_lr(nn::epoch_lr(config_, state_.epoch));
  nn::epoch_permutation(train_.n, state_.seed, state_.epoch, order_);
  step_in_epoch_ = 0;
  epoch_started_ = true;
}

void DataParallelTrainer::count_step() {
  ++state_.step;
  if (++step_in_epoch_ == steps_per_epoch()) {
    ++state_.epoch;
    epoch_started_ = false;
  }
  times_.steps += 1;
}

DataParallelTrainer::StepResult DataParallelTrainer::step() {
  if (!epoch_started_) start_epoch();
  trace::Span step_span("step", "step");
  const auto t0 = Clock::now();
  const std::size_t n = train_.n, dim = train_.dim, classes = config_.spec.widths.back();
  const std::size_t first = step_in_epoch_ * global_batch();
  StepResult r;
  r.global_rows = std::min(global_batch(), n - first);
  const Block mine = block_of(r.global_rows, size(), rank());
  r.rows = mine.count;
  batch_y_.resize(config_.batch);
  // A 16-bit step's rows rounded as they are gathered (no float32 batch to round after).
  const std::uint32_t* rows_at = order_.data() + first + mine.offset;
  if (config_.precision == nn::Precision::fp32) {
    batch_x_.resize(config_.batch * dim);
    nn::gather_batch(train_, rows_at, mine.count, batch_x_.data(), batch_y_.data());
  } else {
    batch_x16_.resize(config_.batch * dim);
    nn::gather_batch_16bit(config_.precision, train_, rows_at, mine.count, batch_x16_.data(),
                           batch_y_.data());
  }

  if (options_.fuse_update_alone && size() == 1) {
    r.skipped = !fused_step(mine.count, r);
    if (options_.after_compute)
      options_.after_compute(rank(), std::chrono::duration<double>(Clock::now() - t0).count());
    count_step();
    times_.compute_s += seconds_since(t0);
    times_.total_s += seconds_since(t0);
    return r;
  }
  if (config_.precision != nn::Precision::fp32) {
    const double wait_before = times_.wait_s;  // with overlap: the wait in finish_step
    const bool apply = mixed_compute_and_reduce(mine.count, r);
    const double compute_wait = times_.wait_s - wait_before;
    if (options_.after_compute)
      options_.after_compute(rank(), std::chrono::duration<double>(Clock::now() - t0).count());
    const auto t1 = Clock::now();
    if (apply && sharded()) {
      sharded_update_16bit();
    } else if (apply) {
      // From the summed 16-bit gradients, unscaled by the scale this step ran with.
      trace::Span update("sgd", "update");
      // The parameters' 16-bit rounding written as they are updated: the next step's working
      // copy, without a pass of its own.
      const nn::Mlp::MixedUpdate to = model_.mixed_update(config_.precision);
      opt_.step_16bit(to.params, grads16_, config_.precision, mixed_scale_, to.params16);
    }
    r.skipped = !apply;
    count_step();
    // (Sharded, the all-gather after the update counted itself as communication.)
    const double gathered = times_.wait_s - wait_before - compute_wait;
    times_.compute_s += std::chrono::duration<double>(t1 - t0).count() - compute_wait;
    times_.update_s += seconds_since(t1) - gathered;
    times_.total_s += seconds_since(t0);
    return r;
  }
  const std::size_t layers = model_.layers();
  const std::function<void(std::size_t)> hook = [this](std::size_t l) {
    if (sync_) sync_->layer_done(l);
  };
  if (sync_) sync_->begin_step();
  if (mine.count > 0) {
    trace::Span compute("forward + backward", "compute");
    model_.forward_layers(0, layers, batch_x_.data(), mine.count, acts_);
    dlogits_.resize(mine.count * classes);
    // Each rank's gradient is its rows' share of the global batch's mean: the sum over ranks
    // is the global gradient, so the all-reduce is a plain sum.
    const nn::LossResult lr = nn::softmax_xent_loss(acts_.output(), batch_y_.data(), mine.count,
                                                    classes, dlogits_.data(), r.global_rows);
    r.loss_sum = lr.loss * static_cast<double>(mine.count);
    r.correct = lr.correct;
    model_.backward_layers(0, layers, acts_, dlogits_.data(), nullptr, false, hook);
  } else {
    // No rows for this rank in the epoch's last, short batch: it contributes zeros.
    std::fill(model_.gradients().begin(), model_.gradients().end(), 0.0f);
    for (std::size_t l = layers; l-- > 0;) hook(l);
  }
  if (options_.after_compute)
    options_.after_compute(rank(), std::chrono::duration<double>(Clock::now() - t0).count());
  const auto t1 = Clock::now();
  if (sync_) {
    trace::Span wait("finish all-reduce", "wait");
    sync_->finish_step();
  } else if (sharded()) {
    trace::Span reduce("reduce-scatter", "comm");
    reduce_scatter_ring(comm_, model_.gradients(), options_.algo);
  }
  const auto t2 = Clock::now();
  if (sharded()) times_.reduce_s += std::chrono::duration<double>(t2 - t1).count();
  double gathered = 0;  // sharded: the all-gather after the update, communication
  if (sharded()) {
    const double before = times_.wait_s;
    sharded_update_fp32();
    gathered = times_.wait_s - before;
  } else {
    trace::Span update("sgd", "update");
    opt_.step(model_.parameters(), model_.gradients());
  }
  const auto t3 = Clock::now();

  count_step();
  times_.compute_s += std::chrono::duration<double>(t1 - t0).count();
  times_.wait_s += std::chrono::duration<double>(t2 - t1).count();
  times_.update_s += std::chrono::duration<double>(t3 - t2).count() - gathered;
  times_.total_s += std::chrono::duration<double>(t3 - t0).count();
  if (sync_) times_.reduce_s = sync_->reduce_seconds() - reduce_base_;
  return r;
}

bool DataParallelTrainer::mixed_compute_and_reduce(std::size_t rows, RankStepResult& r) {
  const nn::Precision p = config_.precision;
  const bool fp16 = p == nn::Precision::fp16;
  const float scale = fp16 ? scaler_.scale() : 1.0f;
  mixed_scale_ = scale;
  // The ring sums the model's own 16-bit gradients in place (a rank without rows this step, in
  // an epoch's short last batch, contributes zeros from a buffer of its own).
  // With overlap each layer goes to the communication thread as soon as it is stored.
  std::function<void(std::size_t)> hand_over;
  if (sync_) {
    sync_->begin_step();
    hand_over = [this](std::size_t l) {
      if (l + 1 == model_.layers()) grads16_ = model_.mixed_gradients();  // the first handed over
      sync_->layer_done(l);
    };
  }
  std::span<std::uint16_t> g;
  if (rows > 0) {
    trace::Span compute("forward + backward", "compute");
    // Neither unscaled nor checked here: the update reads the 16-bit sum itself
    // (Sgd::step_16bit), and the sum is what is checked, below.
    const nn::Mlp::MixedStep m = model_.forward_backward_mixed(
        p, batch_x16_.data(), batch_y_.data(), rows, scale, &r.correct, r.global_rows,
        nn::Mlp::MixedGrads::keep, hand_over);
    r.loss_sum = static_cast<double>(m.loss) * static_cast<double>(rows);
    g = model_.mixed_gradients();
  } else {
    const nn::Mlp& model = model_;
    zeros16_.assign(model.parameters().size(), std::uint16_t{0});  // +0 in both formats
    g = zeros16_;
    if (hand_over) {
      grads16_ = g;
      for (std::size_t l = model_.layers(); l-- > 0;) sync_->layer_done(l);
    }
  }
  // (With overlap the communication thread reads grads16_ from the first hand-over on: it was
  // set then, and is not written again until finish_step has returned.)
  if (!sync_) grads16_ = g;
  if (sync_) {
    trace::Span wait("finish all-reduce", "wait");
    const auto t0 = Clock::now();
    sync_->finish_step();
    times_.wait_s += seconds_since(t0);
    times_.reduce_s = sync_->reduce_seconds() - reduce_base_;
  } else if (sharded()) {
    // Only this rank's block is summed: it checks that, and the ranks agree on the verdict.
    trace::Span reduce("16-bit reduce-scatter", "comm");
    const auto t0 = Clock::now();
    const Block mine = reduce_scatter_ring_16bit(comm_, p, g, options_.algo);
    const bool bad = share_verdict_and_biases(g, mine);
    const double s = seconds_since(t0);
    times_.wait_s += s;
    times_.reduce_s += s;
    return fp16 ? scaler_.update(bad) : !bad;
  } else if (size() > 1) {
    trace::Span reduce("16-bit all-reduce", "comm");
    const auto t0 = Clock::now();
    allreduce_ring_16bit(comm_, p, g, options_.algo);
    // On the compute thread, after backward: all of it is exposed.
    const double s = seconds_since(t0);
    times_.wait_s += s;
    times_.reduce_s += s;
  }
  // Every rank sees the same sum, so every rank takes the same decision.
  const bool finite = nn::all_finite_16bit(p, g);
  return fp16 ? scaler_.update(!finite) : finite;
}

std::map<std::string, double> DataParallelTrainer::epoch_metrics() const {
  if (config_.precision != nn::Precision::fp16) return {};
  return {{"loss_scale", static_cast<double>(scaler_.scale())}};
}

nn::EpochResult run_rank_epoch(Communicator& comm, std::size_t steps, std::size_t samples,
                               std::uint64_t epoch, const std::function<RankStepResult()>& step,
                               const std::function<std::uint64_t()>& step_count,
                               const std::function<void(const nn::StepProgress&)>& on_progress,
                               std::size_t report_every) {
  const auto start = Clock::now();
  // [loss sum, correct, rows] over the epoch and over the window since the last report; the
  // window is summed over the ranks at each report.
  double epoch_loss = 0, window_loss = 0;
  std::size_t epoch_correct = 0, window_correct = 0, window_rows = 0, done = 0;
  std::vector<float> sums(3);
  nn::EpochResult result;
  for (std::size_t s = 0; s < steps; ++s) {
    const RankStepResult r = step();
    result.skipped_steps += r.skipped ? 1 : 0;
    window_loss += r.loss_sum;
    window_correct += r.correct;
    window_rows += r.rows;
    done += r.global_rows;
    const bool last = s + 1 == steps;
    if (last || (report_every > 0 && (s + 1) % report_every == 0)) {
      sums = {static_cast<float>(window_loss), static_cast<float>(window_correct),
              static_cast<float>(window_rows)};
      if (comm.size() > 1) comm.all_reduce(sums);
      epoch_loss += sums[0];
      epoch_correct += static_cast<std::size_t>(std::lround(sums[1]));
      if (on_progress) {
        nn::StepProgress p;
        p.epoch = epoch;
        p.step_in_epoch = s + 1;
        p.steps_per_epoch = steps;
        p.step = step_count();
        p.loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
        p.accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
        p.seconds = seconds_since(start);
        p.samples = done;
        on_progress(p);
      }
      window_loss = 0;
      window_correct = 0;
      window_rows = 0;
    }
  }
  result.seconds = seconds_since(start);
  result.samples = samples;
  if (samples > 0) {
    result.loss = epoch_loss / static_cast<double>(samples);
    result.accuracy = static_cast<double>(epoch_correct) / static_cast<double>(samples);
  }
  return result;
}

nn::EpochResult DataParallelTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t report_every) {
  if (epoch_started_ && step_in_epoch_ != 0)
    throw std::logic_error("DataParallelTrainer::run_epoch: an epoch is half done (step())");
  start_epoch();
  nn::EpochResult result = run_rank_epoch(
      comm_, steps_per_epoch(), train_.n, state_.epoch, [this] { return step(); },
      [this] { return state_.step; }, on_progress, report_every);
  gather_shards();  // whole state between epochs, for evaluation and checkpoints
  return result;
}

nn::EvalResult DataParallelTrainer::evaluate(const nn::Dataset& d) {
  // Float32's sharded update gathers the parameters every step (only the momentum goes stale);
  // in 16 bits it gathers their 16-bit copy, and evaluation reads the master weights.
  if (shards_stale_ && config_.precision != nn::Precision::fp32)
    throw std::logic_error(
        "DataParallelTrainer::evaluate: the sharded 16-bit update left this rank's master "
        "weights outside its block stale; call gather_shards() on every rank first");
  return model_.evaluate(d.x.data(), d.y.data(), d.n);
}

void DataParallelTrainer::save(const std::filesystem::path& checkpoint) const {
  if (shards_stale_)
    throw std::logic_error(
        "DataParallelTrainer::save: the sharded update left this rank's momentum (in 16 bits "
        "also its master weights) outside its block stale; call gather_shards() on every rank "
        "first");
  nn::save_checkpoint(checkpoint, model_, opt_, state_);  // atomic: temporary file, rename
}

void DataParallelTrainer::resume(const std::filesystem::path& checkpoint) {
  // A checkpoint of another mode or rank count is refused, the model left as it was.
  nn::TrainState loaded =
      nn::load_checkpoint(checkpoint, model_, opt_, "sync", static_cast<std::uint64_t>(size()));
  loaded.mode = "sync";
  loaded.workers = static_cast<std::uint64_t>(size());
  state_ = loaded;
  epoch_started_ = false;
  step_in_epoch_ = 0;
  shards_stale_ = false;  // every rank loaded the whole state
}

double replica_divergence(Communicator& comm, std::span<const float> values) {
  if (comm.size() == 1) return 0;
  std::vector<float> root(values.begin(), values.end());
  comm.broadcast(root, 0);
  float worst = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float d = std::fabs(values[i] - root[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  // Bit-for-bit: a difference too small to show as a float difference still counts.
  if (worst == 0 && std::memcmp(values.data(), root.data(), values.size() * sizeof(float)) != 0)
    worst = 1e-30f;
  std::vector<float> w = {worst};
  comm.all_reduce(w);
  return w[0];
}

}  // namespace concurdl::dp
