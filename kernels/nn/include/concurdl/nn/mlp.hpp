// The MLP: Linear -> ReLU -> ... -> Linear, with softmax cross-entropy on the logits.
// Row-major float tensors, batch-major: an input batch is batch x widths[0].
//
// Every parameter lives in one contiguous buffer and every gradient in another, laid out the
// same way (layer by layer: W then b, W row-major out x in), with per-layer views into both.
// So one all-reduce over gradients() moves every gradient, and buckets of it (layer_offsets())
// move them in pieces, as data-parallel training does in chapter 05.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/kernels/gemm.hpp"
#include "concurdl/nn/tensor.hpp"

namespace concurdl::nn {

struct MlpSpec {
  std::vector<std::size_t> widths = {784, 256, 128, 10};  // input, hidden..., classes
  std::string describe() const;                            // "784-256-128-10"
  // "784-256-128-10"; throws std::invalid_argument naming what is wrong (fewer than two
  // widths, a zero, not a number).
  static MlpSpec parse(std::string_view text);
  bool operator==(const MlpSpec&) const = default;
};

struct LayerView {
  MatrixView w;  // out x in
  std::span<float> b;
};

struct EvalResult {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct
  std::size_t samples = 0;
};

class Mlp {
 public:
  // Deterministic initialisation from `seed` (He-uniform weights, zero biases), the same on
  // every machine and compiler (the suite's own generator, not <random>'s distributions).
  Mlp(MlpSpec spec, std::uint64_t seed, kernels::GemmVersion gemm = kernels::GemmVersion::openblas);

  const MlpSpec& spec() const { return spec_; }
  kernels::GemmVersion gemm() const { return gemm_; }
  std::size_t layers() const { return spec_.widths.size() - 1; }

  std::span<float> parameters() { return params_; }
  std::span<const float> parameters() const { return params_; }
  std::span<float> gradients() { return grads_; }
  std::span<const float> gradients() const { return grads_; }
  LayerView layer(std::size_t l);                  // views into parameters()
  LayerView layer_gradient(std::size_t l);         // views into gradients()
  // Where layer l's parameters start in the flat buffers, plus the total at the end
  // (layers() + 1 entries): the natural bucket boundaries for an all-reduce.
  const std::vector<std::size_t>& layer_offsets() const { return offsets_; }

  // Forward and backward on one batch: x is batch x widths[0], labels batch values in
  // [0, classes). Overwrites gradients() with the mean-loss gradient; returns the mean loss.
  // `correct`, when given, receives how many predictions were right.
  float forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                         std::size_t* correct = nullptr);
  // The same, and the gradient of the mean loss with respect to the input into dx (batch x
  // widths[0]): what a layer below the MLP would need, and what the gradient check tests.
  float forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                         std::size_t* correct, float* dx);
  // Forward only: logits (batch x classes) into `logits`.
  void forward(const float* x, std::size_t batch, float* logits);
  // Mean loss and accuracy over n samples, in batches of `batch`.
  EvalResult evaluate(const float* x, const std::uint8_t* labels, std::size_t n,
                      std::size_t batch = 1000);

 private:
  MlpSpec spec_;
  kernels::GemmVersion gemm_;
  std::vector<float> params_, grads_;
  std::vector<std::size_t> offsets_;
  std::vector<std::vector<float>> acts_;  // activations per layer, sized for the last batch
  std::vector<float> probs_, delta_, delta_prev_;
};

}  // namespace concurdl::nn
