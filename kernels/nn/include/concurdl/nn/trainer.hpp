// The training loop: epochs over a data set shuffled by a permutation drawn from (seed, epoch)
// alone, so a run resumed from a checkpoint at an epoch boundary takes exactly the steps the
// uninterrupted run would have taken; and with the same seed and the same thread count, the
// same result bit for bit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>

#include "concurdl/kernels/gemm.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/precision.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::nn {

struct TrainConfig {
  MlpSpec spec;
  std::size_t batch = 64;
  SgdOptions sgd;
  std::uint64_t seed = 1;
  int threads = 0;  // 0: kernels::compute_threads() as it is
  kernels::GemmVersion gemm = kernels::GemmVersion::openblas;
  // Learning-rate schedule: epoch e (0-based) runs at sgd.lr * lr_decay^e. A function of the
  // epoch alone, so a resumed run gets the same rates. 1: constant (and the trainer leaves the
  // optimiser's rate alone, so a caller may drive it with Sgd::set_lr). The defaults (batch 64,
  // lr 0.02, momentum 0.9, decay 0.8) take 784-256-128-10 to ~0.89 test accuracy on
  // Fashion-MNIST in 10 epochs; constant rates end lower and noisier (0.05: 0.867, 0.01: 0.885).
  float lr_decay = 0.8f;
  // Each weight matrix's update fused into the GEMM that computes its gradient (Mlp::train_step,
  // Mlp::train_step_mixed); false: forward_backward (forward_backward_mixed), then Sgd::step
  // (Sgd::step_16bit) over the flat buffers. In float32 the same bits either way; in 16 bits the
  // fused step keeps the weight gradients in float32 (the unfused one rounds them to 16 bits).
  bool fuse_update = true;
  // The format of a step's tensors (precision.hpp): fp32, or bf16 / fp16 storage with float32
  // master weights and sums. fp16 scales the loss dynamically (loss_scaler) and skips a step
  // whose 16-bit gradients overflowed; bf16 runs at a scale of 1 and skips only a step whose
  // 16-bit gradients are not finite.
  Precision precision = Precision::fp32;
  LossScalerOptions loss_scaler;
};

// The learning rate of epoch `epoch` under config's schedule (sgd.lr * lr_decay^epoch).
float epoch_lr(const TrainConfig& config, std::uint64_t epoch);

struct StepProgress {
  std::uint64_t epoch = 0;  // the epoch running (0-based)
  std::size_t step_in_epoch = 0, steps_per_epoch = 0;
  std::uint64_t step = 0;   // optimiser steps taken in all
  double loss = 0;          // mean loss of the batches since the last report
  double accuracy = 0;      // their training accuracy
  double seconds = 0;       // since the epoch started
  std::size_t samples = 0;  // samples processed in this epoch so far
};

struct EpochResult {
  double loss = 0, accuracy = 0;  // means over the epoch's batches (training mode)
  std::size_t samples = 0;
  double seconds = 0;             // wall time of the epoch's steps (no evaluation)
  std::size_t skipped_steps = 0;  // mixed precision: steps skipped for non-finite gradients
};

// An epoch's steps added up, as every trainer reports them: the loss and accuracy over the
// epoch's samples, and a StepProgress every `report_every` steps and at the last, over the steps
// since the previous report. Times from construction.
class EpochMeter {
 public:
  EpochMeter(std::function<void(const StepProgress&)> on_progress, std::size_t report_every,
             std::size_t steps, std::uint64_t epoch);
  // Step s (0-based) of `rows` samples, after `first` of the epoch's: its mean loss and correct
  // count; `step` is the optimiser steps taken in all, this one included.
  void add(std::size_t s, std::size_t first, std::size_t rows, double loss, std::size_t correct,
           std::uint64_t step);
  // The epoch's loss, accuracy, samples (n) and seconds into `result` (its other fields kept).
  void finish(std::size_t n, EpochResult& result) const;

 private:
  std::function<void(const StepProgress&)> on_progress_;
  std::size_t report_every_, steps_;
  std::uint64_t epoch_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double loss_sum_ = 0, window_loss_ = 0;
  std::size_t correct_sum_ = 0, window_correct_ = 0, window_samples_ = 0;
};

class Trainer {
 public:
  Trainer(TrainConfig config, const Dataset& train);

  // One epoch: the permutation for (seed, epoch), batches of config.batch (the last partial
  // batch is used too), one SGD step each. on_progress (may be empty) is called about every
  // `report_every` steps and at the end.
  EpochResult run_epoch(const std::function<void(const StepProgress&)>& on_progress = {},
                        std::size_t report_every = 50);

  EvalResult evaluate(const Dataset& d, std::size_t batch = 1000);

  void save(const std::filesystem::path& checkpoint) const;
  // Restores model, optimiser and state; throws CheckpointError (the architecture must match).
  void resume(const std::filesystem::path& checkpoint);

  const TrainState& state() const { return state_; }
  Mlp& model() { return model_; }
  const Mlp& model() const { return model_; }
  Sgd& optimizer() { return opt_; }
  // fp16's dynamic loss scale (its scale, good steps and skips so far); bf16 and fp32 leave it
  // at its start. Not in checkpoints: a resumed run starts from the initial scale.
  const LossScaler& loss_scaler() const { return scaler_; }
  const TrainConfig& config() const { return config_; }

 private:
  TrainConfig config_;
  const Dataset& train_;
  Mlp model_;
  Sgd opt_;
  LossScaler scaler_;
  TrainState state_;
  std::vector<std::uint32_t> order_;
  kernels::LineVector<float> batch_x_;            // on cache lines (aligned.hpp)
  kernels::LineVector<std::uint16_t> batch_x16_;  // a 16-bit step's batch (gather_batch_16bit)
  std::vector<std::uint8_t> batch_y_;
};

}  // namespace concurdl::nn
