// Fusion of element-wise chains (fusion.hpp).
#include "concurdl/df/fusion.hpp"

namespace concurdl::df {

FusedGraph fuse_elementwise(const Graph& g) {
  const std::vector<NodeId> order = topological_order(g);
  const auto consumers = g.consumers();
  // A node whose value only its one consumer, itself a unary element-wise op, reads: it can
  // live in that consumer's registers instead of memory.
  const auto absorbable = [&](NodeId v) {
    return is_unary_elementwise(g.node(v).op) && consumers[v].size() == 1 &&
           is_unary_elementwise(g.node(consumers[v][0]).op);
  };
  FusedGraph out{Graph(g.gemm()), std::vector<NodeId>(g.size(), kAbsorbed), 0};
  for (const NodeId v : order) {
    const Node& node = g.node(v);
    if (absorbable(v)) continue;  // its consumer takes it into its chain
    if (is_unary_elementwise(node.op) && node.inputs.size() == 1 && absorbable(node.inputs[0])) {
      // v ends a chain: walk back over the absorbed nodes to the value the chain starts from.
      std::vector<std::pair<Op, float>> chain;
      NodeId u = v;
      NodeId base = 0;
      for (;;) {
        chain.insert(chain.begin(), {g.node(u).op, g.node(u).alpha});
        const NodeId p = g.node(u).inputs.at(0);
        if (!absorbable(p)) {
          base = p;
          break;
        }
        u = p;
      }
      out.map[v] = out.graph.fused(out.map[base], std::move(chain));
      ++out.chains;
      continue;
    }
    std::vector<NodeId> inputs;
    for (const NodeId i : node.inputs) inputs.push_back(out.map[i]);
    switch (node.op) {
      case Op::input:
        out.map[v] = out.graph.input(node.constant, node.name);
        break;
      case Op::variable:
        out.map[v] =
            out.graph.variable(node.constant.rows, node.constant.cols, node.external, node.name);
        break;
      case Op::fused:
        out.map[v] = out.graph.fused(inputs.at(0), node.chain);
        break;
      case Op::custom:
        out.map[v] = out.graph.custom(node.name, inputs, node.fn);
        break;
      default:
        out.map[v] = out.graph.add_node(node.op, inputs, node.alpha);
    }
  }
  return out;
}

}  // namespace concurdl::df
