// Sharded data parallelism, ZeRO stages 0-3 (zero.hpp): ZeRO-2's steps and one rank's step.
// The epoch, the whole state between epochs (gather, evaluate, save, resume) and the records'
// figures are in zero_epoch.cpp; the counted buffers, ZeRO's model and the communication queue
// in zero_support.cpp.
#include "concurdl/dp/zero.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "concurdl/core/clock.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::dp {

namespace {
using Clock = std::chrono::steady_clock;
const char* stage_words(int stage) {
  switch (stage) {
    case 0:
      return "replicated";
    case 1:
      return "momentum sharded";
    case 2:
      return "gradients + momentum sharded";
    default:
      return "parameters + gradients + momentum sharded (FSDP)";
  }
}
}  // namespace

// --- ZeRO-2's steps -----------------------------------------------------------------------------

void zero_reduce_layer(Communicator& comm, std::span<float> whole, std::span<float> grad_shard,
                       const AlgoOptions& opts) {
  const Block mine = block_of(whole.size(), comm.size(), comm.rank());
  if (grad_shard.size() != mine.count)
    throw std::invalid_argument(
        fmt::format("zero_reduce_layer: rank {}'s block of {} floats is {}, "
                    "the shard {}",
                    comm.rank(), whole.size(), mine.count, grad_shard.size()));
  reduce_scatter_ring(comm, whole, opts);
  std::memcpy(grad_shard.data(), whole.data() + mine.offset, mine.count * sizeof(float));
}

void zero_update_layer(Communicator& comm, std::span<float> params,
                       std::span<const float> grad_shard, std::span<float> momentum,
                       const nn::SgdOptions& sgd, const AlgoOptions& opts) {
  const Block mine = block_of(params.size(), comm.size(), comm.rank());
  if (grad_shard.size() != mine.count || momentum.size() != mine.count)
    throw std::invalid_argument(fmt::format(
        "zero_update_layer: rank {}'s block of {} floats is {}; gradient shard {}, momentum {}",
        comm.rank(), params.size(), mine.count, grad_shard.size(), momentum.size()));
  float* p = params.data() + mine.offset;
  for (std::size_t i = 0; i < mine.count; ++i)
    kernels::sgd_update(p[i], momentum[i], grad_shard[i], sgd.lr, sgd.momentum, sgd.weight_decay);
  all_gather_ring(comm, params, opts);
}

// --- ZeroTrainer --------------------------------------------------------------------------------

ZeroTrainer::ZeroTrainer(Communicator& comm, nn::TrainConfig config, const nn::Dataset& train,
                         ZeroOptions options)
    : comm_(comm),
      config_(std::move(config)),
      train_(train),
      options_(std::move(options)),
      model_(config_.spec, config_.seed, config_.gemm, &ledger_),
      offsets_(model_.layer_offsets()),
      velocity_(ledger_, MemoryKind::optimizer),
      param_shard_(ledger_, MemoryKind::parameters),
      grad_shard_(ledger_, MemoryKind::gradients),
      lr_(config_.sgd.lr),
      batch_x_(kernels::LineAllocator<float>(&ledger_, MemoryKind::activations)),
      dlogits_(kernels::LineAllocator<float>(&ledger_, MemoryKind::workspace)),
      delta_{kernels::LineVector<float>(
                 kernels::LineAllocator<float>(&ledger_, MemoryKind::workspace)),
             kernels::LineVector<float>(
                 kernels::LineAllocator<float>(&ledger_, MemoryKind::workspace))},
      full_momentum_(kernels::LineAllocator<float>(&ledger_, MemoryKind::optimizer)) {
  if (options_.stage < 0 || options_.stage > 3)
    throw UsageError(fmt::format("--zero {}: the stages are 0, 1, 2 and 3", options_.stage));
  options_.algo.memory = &ledger_;  // the ring's scratch is the rank's too
  if (!options_.zero2.reduce) options_.zero2.reduce = &zero_reduce_layer;
  if (!options_.zero2.update) options_.zero2.update = &zero_update_layer;
  if (config_.batch == 0) throw std::invalid_argument("ZeroTrainer: batch size 0");
  if (comm_.memory() != MemorySpace::host)
    throw UsageError(fmt::format(
        "--zero: the {} backend works on device memory; this trainer runs the MLP on the CPU",
        comm_.name()));
  if (train_.dim != config_.spec.widths.front() || train_.classes > config_.spec.widths.back() ||
      train_.x.size() != train_.n * train_.dim || train_.y.size() != train_.n ||
      (!train_.pixels.empty() && train_.pixels.size() != train_.x.size()))
    throw std::invalid_argument("ZeroTrainer: the data set does not fit the model " +
                                config_.spec.describe());
  const int n = size(), r = rank();
  const std::size_t L = model_.layers();
  shard_offsets_.push_back(0);
  for (std::size_t l = 0; l < L; ++l) {
    Layer layer;
    layer.offset = offsets_[l];
    layer.count = offsets_[l + 1] - offsets_[l];
    layer.mine = block_of(layer.count, n, r);
    layer.shard_offset = shard_offsets_.back();
    shard_offsets_.push_back(layer.shard_offset + layer.mine.count);
    layers_.push_back(layer);
  }
  const int stage = options_.stage;
  velocity_.allocate(stage == 0 ? parameter_count() : shard_count());
  if (stage >= 2) {
    grad_shard_.allocate(shard_count());
    model_.release_gradients();
    for (std::size_t l = 0; l < L; ++l) layer_grad_.emplace_back(ledger_, MemoryKind::gradients);
  }
  if (stage >= 3) {
    param_shard_.allocate(shard_count());
    for (const Layer& layer : layers_)
      std::memcpy(param_shard_.data() + layer.shard_offset,
                  model_.parameters().data() + layer.offset + layer.mine.offset,
                  layer.mine.count * sizeof(float));
    // The writer keeps the whole initial model, for an evaluation before the first epoch (as
    // after each one); the next step frees it.
    if (r == 0) {
      full_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm, &ledger_);
      full_model_->release_gradients();
    }
    model_.release_parameters();
    for (std::size_t l = 0; l < L; ++l) gathered_.emplace_back(ledger_, MemoryKind::parameters);
  }
  for (std::size_t l = 0; l < L; ++l) acts_.emplace_back(&ledger_);
  state_.seed = config_.seed;
  state_.mode = "sync";
  state_.workers = static_cast<std::uint64_t>(size());
  queue_ =
      std::make_unique<CommQueue>(options_.overlap && n > 1, fmt::format("rank {} collectives", r));
  ledger_.reset_peak();
}

ZeroTrainer::~ZeroTrainer() {
  queue_.reset();  // its thread may be using the buffers below
  if (options_.stage >= 3)
    for (std::size_t l = 0; l < layers_.size(); ++l) model_.bind_layer_parameters(l, nullptr);
}

std::size_t ZeroTrainer::steps_per_epoch() const {
  return (train_.n + global_batch() - 1) / global_batch();
}

std::string ZeroTrainer::describe() const {
  return fmt::format(
      "{} rank{} ({}), ZeRO stage {} ({}), ring reduce-scatter / all-gather per layer, batch {} "
      "per rank ({} global), overlap {}",
      size(), size() == 1 ? "" : "s", comm_.name(), stage(), stage_words(stage()), config_.batch,
      global_batch(), options_.overlap ? "on" : "off");
}

void ZeroTrainer::start_epoch() {
  if (config_.lr_decay != 1.0f) lr_ = nn::epoch_lr(config_, state_.epoch);
  nn::epoch_permutation(train_.n, state_.seed, state_.epoch, order_);
  step_in_epoch_ = 0;
  epoch_started_ = true;
}

CommQueue::Ticket ZeroTrainer::gather_layer(std::size_t l) {
  const Layer& layer = layers_[l];
  CountedBuffer& buf = gathered_[l];
  buf.allocate(layer.count);
  model_.bind_layer_parameters(l, buf.data());
  return queue_->submit([this, l] {
    const Layer& ly = layers_[l];
    trace::Span span(trace::recording() ? fmt::format("all-gather L{}", l) : std::string(),
                     "all-gather");
    std::span<float> whole = gathered_[l].span();
    std::memcpy(whole.data() + ly.mine.offset, param_shard_.data() + ly.shard_offset,
                ly.mine.count * sizeof(float));
    all_gather_ring(comm_, whole, options_.algo);
  });
}

CommQueue::Ticket ZeroTrainer::reduce_layer(std::size_t l) {
  return queue_->submit([this, l] {
    const Layer& ly = layers_[l];
    const int stage = options_.stage;
    trace::Span span(trace::recording()
                         ? fmt::format("{} L{}", stage == 0 ? "all-reduce" : "reduce-scatter", l)
                         : std::string(),
                     stage == 0 ? "all-reduce" : "reduce-scatter");
    if (stage <= 1) {
      const std::span<float> g = model_.gradients().subspan(ly.offset, ly.count);
      if (stage == 0)
        allreduce_ring(comm_, g, g, options_.algo);
      else
        reduce_scatter_ring(comm_, g, options_.algo);
      return;
    }
    CountedBuffer& whole = layer_grad_[l];
    options_.zero2.reduce(comm_, whole.span(),
                          grad_shard_.span().subspan(ly.shard_offset, ly.mine.count),
                          options_.algo);
    whole.release();  // stage 2's point: the layer's whole gradient lives only until here
  });
}

void ZeroTrainer::update() {
  trace::Span span("sgd (own blocks)", "update");
  const nn::SgdOptions& o = config_.sgd;
  const float lr = lr_, mu = o.momentum, wd = o.weight_decay;
  float* v = velocity_.data();
  if (options_.stage == 0) {
    float* p = model_.parameters().data();
    const float* g = model_.gradients().data();
    for (std::size_t i = 0; i < parameter_count(); ++i)
      kernels::sgd_update(p[i], v[i], g[i], lr, mu, wd);
    return;
  }
  if (options_.stage <= 2) {  // update the own block, then all-gather the layer
    nn::SgdOptions sgd = o;
    sgd.lr = lr;
    for (const Layer& ly : layers_) {
      const std::span<float> grads =
          options_.stage == 1
              ? model_.gradients().subspan(ly.offset + ly.mine.offset, ly.mine.count)
              : grad_shard_.span().subspan(ly.shard_offset, ly.mine.count);
      const std::span<float> params = model_.parameters().subspan(ly.offset, ly.count);
      const std::span<float> momentum = velocity_.span().subspan(ly.shard_offset, ly.mine.count);
      trace::Span gather(trace::recording() ? "update + all-gather" : std::string(), "all-gather");
      if (options_.stage == 2)
        options_.zero2.update(comm_, params, grads, momentum, sgd, options_.algo);
      else
        zero_update_layer(comm_, params, grads, momentum, sgd, options_.algo);
    }
    return;
  }
  for (const Layer& ly : layers_) {
    float* p = param_shard_.data() + ly.shard_offset;  // stage 3: the own block only
    const float* g = grad_shard_.data() + ly.shard_offset;
    float* vs = v + ly.shard_offset;
    for (std::size_t i = 0; i < ly.mine.count; ++i)
      kernels::sgd_update(p[i], vs[i], g[i], lr, mu, wd);
  }
}

ZeroTrainer::StepResult ZeroTrainer::step() {
  if (!epoch_started_) start_epoch();
  drop_consolidated();  // the whole state of the last epoch's end is stale from here
  trace::Span step_span("step", "step");
  const auto t0 = Clock::now();
  const std::uint64_t sent0 = comm_.bytes_sent();
  const std::size_t n = train_.n, dim = train_.dim, classes = config_.spec.widths.back();
  const std::size_t L = layers_.size();
  const int stage = options_.stage;
  const std::size_t first = step_in_epoch_ * global_batch();
  StepResult r;
  r.global_rows = std::min(global_batch(), n - first);
  const Block mine = block_of(r.global_rows, size(), rank());
  r.rows = mine.count;
  batch_x_.resize(config_.batch * dim);
  batch_y_.resize(config_.batch);
  nn::gather_batch(train_, order_.data() + first + mine.offset, mine.count, batch_x_.data(),
                   batch_y_.data());
  const bool compute = mine.count > 0;  // else: zeros, but every collective as the others

  // Forward, layer by layer; stage 3 gathers each layer's parameters first (the next one's
  // while this one computes, with overlap) and frees them after.
  {
    trace::Span fwd("forward", "compute");
    std::vector<CommQueue::Ticket> gathered(L, 0);
    if (stage >= 3) gathered[0] = gather_layer(0);
    const float* in = batch_x_.data();
    for (std::size_t l = 0; l < L; ++l) {
      if (stage >= 3) {
        if (l + 1 < L && options_.overlap) gathered[l + 1] = gather_layer(l + 1);
        queue_->wait(gathered[l]);
      }
      if (compute) {
        model_.forward_layers(l, l + 1, in, mine.count, acts_[l]);
        in = acts_[l].output();
      }
      if (stage >= 3) {
        model_.bind_layer_parameters(l, nullptr);
        gathered_[l].release();
        if (l + 1 < L && !options_.overlap) gathered[l + 1] = gather_layer(l + 1);
      }
    }
  }
  if (compute) {
    dlogits_.resize(mine.count * classes);
    const nn::LossResult lr =
        nn::softmax_xent_loss(acts_[L - 1].output(), batch_y_.data(), mine.count, classes,
                              dlogits_.data(), r.global_rows);
    r.loss_sum = lr.loss * static_cast<double>(mine.count);
    r.correct = lr.correct;
  }

  // Backward, from the last layer down; each layer's gradient reduced as soon as it is done.
  {
    trace::Span bwd("backward", "compute");
    std::vector<CommQueue::Ticket> gathered(L, 0);
    if (stage >= 3) gathered[L - 1] = gather_layer(L - 1);
    const float* dout = dlogits_.data();
    std::size_t spare = 0;
    for (std::size_t l = L; l-- > 0;) {
      if (stage >= 3) {
        if (l > 0 && options_.overlap) gathered[l - 1] = gather_layer(l - 1);
        queue_->wait(gathered[l]);
      }
      if (stage >= 2) {
        layer_grad_[l].allocate(layers_[l].count);  // zeros: a rank without rows adds nothing
        model_.bind_layer_gradients(l, layer_grad_[l].data());
      }
      if (compute) {
        float* din = nullptr;
        if (l > 0) {
          delta_[spare].resize(mine.count * config_.spec.widths[l]);
          din = delta_[spare].data();
        }
        model_.backward_layers(l, l + 1, acts_[l], dout, din);
        dout = din;
        spare ^= 1;
      } else if (stage <= 1) {
        const std::span<float> g = model_.gradients().subspan(layers_[l].offset, layers_[l].count);
        std::fill(g.begin(), g.end(), 0.0f);
      }
      if (stage >= 2) model_.bind_layer_gradients(l, nullptr);
      if (stage >= 3) {
        model_.bind_layer_parameters(l, nullptr);
        gathered_[l].release();
        if (l > 0 && !options_.overlap) gathered[l - 1] = gather_layer(l - 1);
      }
      reduce_layer(l);
    }
  }
  if (options_.after_compute) options_.after_compute(rank(), seconds_since(t0));
  {
    trace::Span wait("finish reductions", "wait");
    queue_->wait_all();
  }
  update();  // stages 1-2 all-gather the parameters here, on this thread (the queue is idle)
  step_bytes_sent_ += comm_.bytes_sent() - sent0;
  ++steps_counted_;
  ++state_.step;
  if (++step_in_epoch_ == steps_per_epoch()) {
    ++state_.epoch;
    epoch_started_ = false;
  }
  return r;
}

}  // namespace concurdl::dp
