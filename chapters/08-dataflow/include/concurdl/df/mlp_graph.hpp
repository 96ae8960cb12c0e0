// The MLP of kernels/nn as a dataflow graph: its forward and backward recorded as nodes, so that
// an executor can run what does not depend on each other at once (each layer's weight gradient
// and the gradient flowing to the layer below are independent; so are all the weight gradients
// once their deltas exist). The graph computes exactly what nn::Mlp::forward_backward does, the
// same kernels in the same roles (the tests hold every gradient to it).
//
//   layer l forward    z_l = h_{l-1} W_lᵀ + b_l,  h_l = relu(z_l)  (no ReLU on the logits)
//   loss               softmax cross-entropy, mean over the rows: dlogits
//   layer l backward   dW_l = δ_lᵀ h_{l-1},  db_l = Σ_rows δ_l,  δ_{l-1} = relu'(h_{l-1}) ⊙ δ_l W_l
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "concurdl/df/graph.hpp"
#include "concurdl/nn/mlp.hpp"

namespace concurdl::df {

struct MlpGraph {
  Graph graph;
  NodeId logits = 0, dlogits = 0;
  std::vector<NodeId> dw, db;  // per layer: the weight (out x in) and bias (1 x out) gradients
};

// The forward and backward of `model` (its current parameters, copied into the graph as inputs)
// on x (rows x widths[0]) and labels (rows, in [0, classes)).
MlpGraph record_mlp(const nn::Mlp& model, const float* x, const std::uint8_t* labels,
                    std::size_t rows);

}  // namespace concurdl::df
