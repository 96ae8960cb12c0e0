// The MLP of kernels/nn as a dataflow graph: its forward and backward recorded as nodes, so that
// an executor can run what does not depend on each other at once (each layer's weight gradient
// and the gradient flowing to the layer below are independent; so are all the weight gradients
// once their deltas exist). The graph computes exactly what nn::Mlp::forward_backward does, the
// same kernels in the same roles (the tests hold every gradient to it).
//
//   layer l forward    z_l = h_{l-1} W_lᵀ + b_l,  h_l = relu(z_l)  (no ReLU on the logits)
//   loss               softmax cross-entropy, mean over the rows: dlogits
//   layer l backward   dW_l = δ_lᵀ h_{l-1},  db_l = Σ_rows δ_l,  δ_{l-1} = relu'(h_{l-1}) ⊙ δ_l W_l
//
// Recorded once, run every step (TensorFlow's graph mode): the weights and biases are variables
// bound to the model's own parameter buffer, the batch a variable bound to the caller's rows at
// each step (feed), the labels a buffer the loss node reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::df {

struct MlpGraph {
  Graph graph;
  std::size_t rows = 0;
  NodeId x = 0;  // the batch: a variable, rows x widths[0]
  NodeId logits = 0, dlogits = 0;
  std::vector<NodeId> dw, db;  // per layer: the weight (out x in) and bias (1 x out) gradients
  // The labels the loss node reads (rows of them), and the mean loss it computed last.
  std::shared_ptr<std::vector<std::uint8_t>> labels;
  std::shared_ptr<double> loss;

  // Points the batch at x (rows x widths[0]) and copies the labels: the next run trains on them.
  void feed(const float* x_rows, const std::uint8_t* label_rows);
};

// The forward and backward of `model` on batches of `rows` rows. The weights and biases read
// model.parameters() when the graph runs: an optimiser step on the model is seen by the next run.
// The model must outlive the graph.
MlpGraph record_mlp(const nn::Mlp& model, std::size_t rows);
// The same, fed x (rows x widths[0]) and labels (rows, in [0, classes)).
MlpGraph record_mlp(const nn::Mlp& model, const float* x, const std::uint8_t* labels,
                    std::size_t rows);

// Copies the gradients a run computed (values indexed by node, as an executor returns them)
// into model.gradients(), in nn's layout: what the optimiser reads.
void gather_gradients(const MlpGraph& m, const std::vector<Tensor>& values, nn::Mlp& model);

// The same graph with each GEMM's bias, ReLU and ReLU' in its epilogue (fuse_epilogues in
// fusion.hpp), its node ids remapped: forward, one linear_relu node per hidden layer where there
// were three nodes; backward, a matmul_relu_grad where there were two. The same bits.
MlpGraph fuse_epilogues(MlpGraph m);

// What GraphTrainer does to the recorded graph before running it, a row each (ch08/mlp_train's
// `fusion` axis).
enum class Fusion { none, epilogues };
struct FusionRow : VariantInfo {
  Fusion fusion;
};
inline constexpr FusionRow kFusionRows[] = {
    {{"epilogues",
      "bias and ReLU moved into the GEMM before them, ReLU' into the GEMM after (fuse_epilogues), "
      "as nn's layers do"},
     Fusion::epilogues},
    {{"none",
      "the graph as recorded: bias, ReLU and ReLU' nodes of their own, a pass over memory "
      "each"},
     Fusion::none},
};
inline constexpr VariantTable kFusions{kFusionRows, "fusion"};

// Training on the graph: each step feeds a batch, runs the recorded graph (by default with its
// epilogues fused) on `exec` and takes nn's SGD step straight from the gradients the graph holds,
// layer by layer (model.gradients() is not written). The same batches give the same parameters
// as nn::Mlp::forward_backward + nn::Sgd::step (the tests hold them to it).
class GraphTrainer {
 public:
  GraphTrainer(nn::Mlp& model, std::size_t batch, Executor& exec, nn::SgdOptions options = {},
               Fusion fusion = Fusion::epilogues);
  // One step on `batch` rows of x and labels; returns the batch's mean loss before the step.
  double step(const float* x, const std::uint8_t* labels);
  const MlpGraph& graph() const { return graph_; }

 private:
  nn::Mlp& model_;
  MlpGraph graph_;
  Executor& exec_;
  nn::Sgd sgd_;
};

}  // namespace concurdl::df
