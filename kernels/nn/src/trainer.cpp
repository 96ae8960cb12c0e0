// The training loop (trainer.hpp). Everything that decides the numbers — the initial weights,
// the epoch's permutation, the batches, the kernels' work split — is a function of the seed,
// the epoch and the thread count, never of timing or of the history of this process.
#include "concurdl/nn/trainer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>

#include "concurdl/kernels/aligned.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/random.hpp"
#include "step_span.hpp"

namespace concurdl::nn {

namespace {
std::atomic<bool> g_step_phase_spans{false};

void check_dataset(const char* who, const Dataset& d, const MlpSpec& spec) {
  if (d.dim != spec.widths.front())
    throw std::invalid_argument(std::string(who) + ": the data set's samples have " +
                                std::to_string(d.dim) + " features, the model " + spec.describe() +
                                " takes " + std::to_string(spec.widths.front()));
  if (d.classes > spec.widths.back())
    throw std::invalid_argument(std::string(who) + ": the data set has " +
                                std::to_string(d.classes) + " classes, the model " +
                                spec.describe() + " predicts " +
                                std::to_string(spec.widths.back()));
  if (d.x.size() != d.n * d.dim || d.y.size() != d.n ||
      (!d.pixels.empty() && d.pixels.size() != d.n * d.dim))
    throw std::invalid_argument(std::string(who) + ": the data set's buffers do not hold n = " +
                                std::to_string(d.n) + " samples");
}

}  // namespace

void set_step_phase_spans(bool on) { g_step_phase_spans.store(on, std::memory_order_relaxed); }
bool step_phase_spans() { return g_step_phase_spans.load(std::memory_order_relaxed); }

float epoch_lr(const TrainConfig& config, std::uint64_t epoch) {
  float lr = config.sgd.lr;  // repeated multiplication, not std::pow: the same float everywhere
  for (std::uint64_t e = 0; e < epoch && lr > 0.0f; ++e) lr *= config.lr_decay;
  return lr;
}

Trainer::Trainer(TrainConfig config, const Dataset& train)
    : config_(std::move(config)),
      train_(train),
      model_(config_.spec, config_.seed, config_.gemm),
      opt_(model_.parameters().size(), config_.sgd),
      scaler_(config_.loss_scaler) {
  if (config_.batch == 0) throw std::invalid_argument("Trainer: batch size 0");
  check_dataset("Trainer", train_, config_.spec);
  if (train_.n > std::size_t{UINT32_MAX})
    throw std::invalid_argument("Trainer: more than 2^32 samples");
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  state_.seed = config_.seed;
}

EpochResult Trainer::run_epoch(const std::function<void(const StepProgress&)>& on_progress,
                               std::size_t report_every) {
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  const std::size_t n = train_.n, dim = train_.dim, batch = config_.batch;
  const std::size_t steps = (n + batch - 1) / batch;
  if (config_.lr_decay != 1.0f) opt_.set_lr(epoch_lr(config_, state_.epoch));
  epoch_permutation(n, state_.seed, state_.epoch, order_);
  batch_x_.resize(std::min(batch, n) * dim);
  batch_y_.resize(std::min(batch, n));

  EpochResult result;
  EpochMeter meter(on_progress, report_every, steps, state_.epoch);
  for (std::size_t s = 0; s < steps; ++s) {
    const std::size_t first = s * batch, rows = std::min(batch, n - first);
    StepSpan gather("gather");
    // A 16-bit step's batch rounded as it is gathered (gather_batch_16bit): no float32 batch.
    const bool mixed = config_.precision != Precision::fp32;
    if (mixed) {
      batch_x16_.resize(rows * dim);
      gather_batch_16bit(config_.precision, train_, order_.data() + first, rows, batch_x16_.data(),
                         batch_y_.data(), true);
    } else {
      gather_batch(train_, order_.data() + first, rows, batch_x_.data(), batch_y_.data(), true);
    }
    gather.end();
    std::size_t correct = 0;
    float loss = 0;
    if (config_.precision != Precision::fp32 && config_.fuse_update) {
      // The update fused into the weight-gradient GEMMs (Mlp::train_step_mixed); the scaler
      // decides, from the 16-bit output gradients, whether it is applied.
      const bool fp16 = config_.precision == Precision::fp16;
      const Mlp::MixedStep m = model_.train_step_mixed(
          config_.precision, batch_x16_.data(), batch_y_.data(), rows,
          fp16 ? scaler_.scale() : 1.0f, opt_,
          [&](bool finite) { return fp16 ? scaler_.update(!finite) : finite; }, &correct);
      loss = m.loss;
      if (!m.applied) ++result.skipped_steps;
    } else if (config_.precision != Precision::fp32) {
      const bool fp16 = config_.precision == Precision::fp16;
      // The update reads the 16-bit gradients itself (Sgd::step_16bit), unscaled by the scale
      // this step ran with (the scaler may change it below).
      const float scale = fp16 ? scaler_.scale() : 1.0f;
      const Mlp::MixedStep m =
          model_.forward_backward_mixed(config_.precision, batch_x16_.data(), batch_y_.data(), rows,
                                        scale, &correct, 0, Mlp::MixedGrads::check);
      loss = m.loss;
      const bool apply = fp16 ? scaler_.update(!m.finite) : m.finite;
      if (apply) {
        StepSpan sgd("sgd");
        const Mlp::MixedUpdate to = model_.mixed_update(config_.precision);
        opt_.step_16bit(to.params, model_.mixed_gradients(), config_.precision, scale, to.params16);
      } else {
        ++result.skipped_steps;
      }
    } else if (config_.fuse_update) {
      loss = model_.train_step(batch_x_.data(), batch_y_.data(), rows, opt_, &correct);
    } else {
      loss = model_.forward_backward(batch_x_.data(), batch_y_.data(), rows, &correct);
      StepSpan sgd("sgd");
      opt_.step(model_.parameters(), model_.gradients());
    }
    ++state_.step;

    meter.add(s, first, rows, loss, correct, state_.step);
  }
  meter.finish(n, result);
  ++state_.epoch;
  return result;
}

EpochMeter::EpochMeter(std::function<void(const StepProgress&)> on_progress,
                       std::size_t report_every, std::size_t steps, std::uint64_t epoch)
    : on_progress_(std::move(on_progress)),
      report_every_(report_every),
      steps_(steps),
      epoch_(epoch) {}

void EpochMeter::add(std::size_t s, std::size_t first, std::size_t rows, double loss,
                     std::size_t correct, std::uint64_t step) {
  const double weighted = loss * static_cast<double>(rows);
  loss_sum_ += weighted;
  correct_sum_ += correct;
  window_loss_ += weighted;
  window_correct_ += correct;
  window_samples_ += rows;
  const bool last = s + 1 == steps_;
  if (!on_progress_ || !(last || (report_every_ > 0 && (s + 1) % report_every_ == 0))) return;
  StepProgress p;
  p.epoch = epoch_;
  p.step_in_epoch = s + 1;
  p.steps_per_epoch = steps_;
  p.step = step;
  p.loss = window_loss_ / static_cast<double>(window_samples_);
  p.accuracy = static_cast<double>(window_correct_) / static_cast<double>(window_samples_);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  p.samples = first + rows;
  on_progress_(p);
  window_loss_ = 0;
  window_correct_ = 0;
  window_samples_ = 0;
}

void EpochMeter::finish(std::size_t n, EpochResult& result) const {
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result.samples = n;
  if (n > 0) {
    result.loss = loss_sum_ / static_cast<double>(n);
    result.accuracy = static_cast<double>(correct_sum_) / static_cast<double>(n);
  }
}

EvalResult Trainer::evaluate(const Dataset& d, std::size_t batch) {
  check_dataset("Trainer::evaluate", d, config_.spec);
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  return model_.evaluate(d.x.data(), d.y.data(), d.n, batch);
}

void Trainer::save(const std::filesystem::path& checkpoint) const {
  save_checkpoint(checkpoint, model_, opt_, state_);
}

void Trainer::resume(const std::filesystem::path& checkpoint) {
  // The checkpoint's seed wins over config().seed: it continues the run that wrote it, whose
  // shuffles were drawn from that seed.
  state_ = load_checkpoint(checkpoint, model_, opt_);
}

}  // namespace concurdl::nn
