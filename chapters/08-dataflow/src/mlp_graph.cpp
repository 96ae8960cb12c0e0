// The MLP as a dataflow graph (mlp_graph.hpp).
#include "concurdl/df/mlp_graph.hpp"

#include <memory>

namespace concurdl::df {

MlpGraph record_mlp(const nn::Mlp& model, const float* x, const std::uint8_t* labels,
                    std::size_t rows) {
  const auto& widths = model.spec().widths;
  const std::size_t layers = widths.size() - 1;
  MlpGraph m{Graph(model.gemm()), 0, 0, {}, {}};
  Graph& g = m.graph;
  const NodeId in = g.input({rows, widths[0], std::vector<float>(x, x + rows * widths[0])}, "x");
  std::vector<NodeId> w(layers), h(layers + 1);  // h[0] = x, h[l + 1] = layer l's output
  h[0] = in;
  const std::span<const float> params = model.parameters();
  const auto& off = model.layer_offsets();
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t i = widths[l], o = widths[l + 1];
    const float* p = params.data() + off[l];
    w[l] = g.input({o, i, std::vector<float>(p, p + o * i)}, "W" + std::to_string(l));
    const NodeId b =
        g.input({1, o, std::vector<float>(p + o * i, p + o * i + o)}, "b" + std::to_string(l));
    const NodeId z = g.add_bias(g.matmul_nt(h[l], w[l]), b);
    h[l + 1] = l + 1 < layers ? g.relu(z) : z;
  }
  m.logits = h[layers];
  // The loss head: nn's own softmax cross-entropy, as one custom node.
  const std::size_t classes = widths.back();
  auto lab = std::make_shared<std::vector<std::uint8_t>>(labels, labels + rows);
  m.dlogits = g.custom(
      "softmax_xent_grad", {m.logits}, [lab, rows, classes](std::span<const Tensor* const> v) {
        Tensor d{rows, classes, std::vector<float>(rows * classes)};
        nn::softmax_xent_loss(v[0]->data.data(), lab->data(), rows, classes, d.data.data());
        return d;
      });
  m.dw.resize(layers);
  m.db.resize(layers);
  NodeId delta = m.dlogits;
  for (std::size_t l = layers; l-- > 0;) {
    m.dw[l] = g.matmul_tn(delta, h[l]);
    m.db[l] = g.column_sum(delta);
    if (l > 0) delta = g.relu_grad(h[l], g.matmul(delta, w[l]));
  }
  return m;
}

}  // namespace concurdl::df
