// SGD with momentum and (decoupled-from-the-loss, L2-style) weight decay, over the flat
// parameter and gradient buffers:  v = momentum * v + (g + weight_decay * p);  p -= lr * v.
// Weight decay applies to every parameter (biases too) to keep the update one loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "concurdl/kernels/aligned.hpp"
#include "concurdl/nn/precision.hpp"

namespace concurdl::nn {

struct SgdOptions {
  float lr = 0.02f;
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
};

class Sgd {
 public:
  // The momentum counted in `account` as optimizer state, when given (core/memory.hpp).
  Sgd(std::size_t parameters, SgdOptions options, MemoryAccount* account = nullptr);
  void step(std::span<float> params, std::span<const float> grads);
  // The same update for parameters [first, first + count) only (a layer's biases, after their
  // gradient: Mlp::train_step; a data-parallel rank's block of a sharded update), on the compute
  // threads as step() is from kSgdParallelMin parameters, else on the calling thread.
  void step_range(std::span<float> params, std::span<const float> grads, std::size_t first,
                  std::size_t count);
  // The same update for parameters [first, first + grads.size()), whose gradients are `grads`
  // (a layer's gradient held apart from the flat buffer: a graph's value), on the compute
  // threads as step() is.
  void step_slice(std::span<float> params, std::span<const float> grads, std::size_t first);
  // The update from 16-bit gradients (a mixed-precision step's, scaled by loss_scale): the same
  // bits as from_16bit, dividing by loss_scale (when not 1) and step(), in one pass that reads 2
  // bytes a gradient instead of writing and reading 4 (the widened gradients stay in L1).
  // `p` is bf16 or fp16; the caller has checked that every gradient is finite. With params16
  // (params' size), each updated parameter is also rounded into it in `p` (the next step's
  // 16-bit working copy: Mlp::mixed_update), while its chunk is in L1.
  void step_16bit(std::span<float> params, std::span<const std::uint16_t> grads16, Precision p,
                  float loss_scale, std::span<std::uint16_t> params16 = {});
  // The same for parameters [first, first + count) only (the spans are whole, as for
  // step_16bit): a data-parallel rank's block of a sharded update.
  void step_16bit_range(std::span<float> params, std::span<const std::uint16_t> grads16,
                        Precision p, float loss_scale, std::span<std::uint16_t> params16,
                        std::size_t first, std::size_t count);
  // Overrides the learning rate for the next steps (schedules).
  void set_lr(float lr) { options_.lr = lr; }
  const SgdOptions& options() const { return options_; }
  std::span<float> velocity() { return velocity_; }
  std::span<const float> velocity() const { return velocity_; }

 private:
  SgdOptions options_;
  kernels::LineVector<float> velocity_;  // on cache lines (aligned.hpp)
};

}  // namespace concurdl::nn
