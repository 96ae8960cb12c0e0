// The MLP as a dataflow graph (mlp_graph.hpp).
#include "concurdl/df/mlp_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>

#include "concurdl/df/fusion.hpp"

namespace concurdl::df {

void MlpGraph::feed(const float* x_rows, const std::uint8_t* label_rows) {
  graph.bind(x, x_rows);
  std::copy(label_rows, label_rows + rows, labels->begin());
}

MlpGraph record_mlp(const nn::Mlp& model, std::size_t rows) {
  const auto& widths = model.spec().widths;
  const std::size_t layers = widths.size() - 1;
  MlpGraph m{Graph(model.gemm()), rows, 0, 0, 0, {}, {}, nullptr, nullptr};
  m.labels = std::make_shared<std::vector<std::uint8_t>>(rows, 0);
  m.loss = std::make_shared<double>(0.0);
  Graph& g = m.graph;
  m.x = g.variable(rows, widths[0], nullptr, "x");
  std::vector<NodeId> w(layers), h(layers + 1);  // h[0] = x, h[l + 1] = layer l's output
  h[0] = m.x;
  const float* params = model.parameters().data();
  const auto& off = model.layer_offsets();
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t i = widths[l], o = widths[l + 1];
    const float* p = params + off[l];
    w[l] = g.variable(o, i, p, fmt::format("W{}", l));
    const NodeId b = g.variable(1, o, p + o * i, fmt::format("b{}", l));
    const NodeId z = g.add_bias(g.matmul_nt(h[l], w[l]), b);
    h[l + 1] = l + 1 < layers ? g.relu(z) : z;
  }
  m.logits = h[layers];
  // The loss head: nn's own softmax cross-entropy, as one custom node.
  const std::size_t classes = widths.back();
  m.dlogits = g.custom(
      "softmax_xent_grad", {m.logits},
      [lab = m.labels, loss = m.loss, rows, classes](std::span<const Tensor* const> v) {
        Tensor d{rows, classes, std::vector<float>(rows * classes)};
        *loss = nn::softmax_xent_loss(v[0]->data.data(), lab->data(), rows, classes, d.data.data())
                    .loss;
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

MlpGraph record_mlp(const nn::Mlp& model, const float* x, const std::uint8_t* labels,
                    std::size_t rows) {
  MlpGraph m = record_mlp(model, rows);
  m.feed(x, labels);
  return m;
}

void gather_gradients(const MlpGraph& m, const std::vector<Tensor>& values, nn::Mlp& model) {
  for (std::size_t l = 0; l < m.dw.size(); ++l) {
    const nn::LayerView grad = model.layer_gradient(l);
    const Tensor& dw = values.at(m.dw[l]);
    const Tensor& db = values.at(m.db[l]);
    std::copy(dw.data.begin(), dw.data.end(), grad.w.data);
    std::copy(db.data.begin(), db.data.end(), grad.b.begin());
  }
}

MlpGraph fuse_epilogues(MlpGraph m) {
  const FusedGraph f = df::fuse_epilogues(m.graph);
  const auto at = [&](NodeId v) {
    if (f.map.at(v) == kAbsorbed)
      throw GraphError(fmt::format("fuse_epilogues: '{}' was absorbed", m.graph.node(v).name));
    return f.map[v];
  };
  m.x = at(m.x);
  m.logits = at(m.logits);
  m.dlogits = at(m.dlogits);
  for (NodeId& v : m.dw) v = at(v);
  for (NodeId& v : m.db) v = at(v);
  m.graph = f.graph;
  return m;
}

GraphTrainer::GraphTrainer(nn::Mlp& model, std::size_t batch, Executor& exec,
                           nn::SgdOptions options, Fusion fusion)
    : model_(model),
      graph_(fusion == Fusion::epilogues ? fuse_epilogues(record_mlp(model, batch))
                                         : record_mlp(model, batch)),
      exec_(exec),
      sgd_(model.parameters().size(), options) {}

double GraphTrainer::step(const float* x, const std::uint8_t* labels) {
  graph_.feed(x, labels);
  const std::vector<Tensor>& values = exec_.run(graph_.graph);
  // Each layer's update reads its gradients where the graph left them: no copy into the model's
  // gradient buffer first (a 784 x 256 weight gradient is 800 KiB, written by its GEMM, read
  // by the update: one pass over it, not three).
  const auto& off = model_.layer_offsets();
  for (std::size_t l = 0; l < graph_.dw.size(); ++l) {
    const Tensor& dw = values.at(graph_.dw[l]);
    sgd_.step_slice(model_.parameters(), dw.data, off[l]);
    sgd_.step_slice(model_.parameters(), values.at(graph_.db[l]).data, off[l] + dw.size());
  }
  return *graph_.loss;
}

}  // namespace concurdl::df
