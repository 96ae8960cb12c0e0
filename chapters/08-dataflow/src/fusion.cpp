// Fusion of element-wise chains (fusion.hpp).
#include "concurdl/df/fusion.hpp"

namespace concurdl::df {

namespace {

// `node` added to out.graph as it is, its inputs mapped.
NodeId copy_node(const Node& node, FusedGraph& out) {
  std::vector<NodeId> inputs;
  for (const NodeId i : node.inputs) inputs.push_back(out.map[i]);
  switch (node.op) {
    case Op::input:
      return out.graph.input(node.constant, node.name);
    case Op::variable:
      return out.graph.variable(node.constant.rows, node.constant.cols, node.external, node.name);
    case Op::fused:
      return out.graph.fused(inputs.at(0), node.chain);
    case Op::custom:
      return out.graph.custom(node.name, inputs, node.fn);
    default:
      return out.graph.add_node(node.op, inputs, node.alpha);
  }
}

}  // namespace

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
    out.map[v] = copy_node(node, out);
  }
  return out;
}

FusedGraph fuse_epilogues(const Graph& g) {
  const std::vector<NodeId> order = topological_order(g);
  const auto consumers = g.consumers();
  const auto only_consumer = [&](NodeId v, Op op) {
    return consumers[v].size() == 1 && g.node(consumers[v][0]).op == op;
  };
  // The node each absorbed node is computed inside (a GEMM inside the element-wise node after
  // it, an add_bias inside its ReLU), found before the walk: a GEMM comes before its epilogue
  // in the order, and must already know it is not to be copied.
  std::vector<bool> absorbed(g.size(), false);
  for (const NodeId v : order) {
    const Node& node = g.node(v);
    if (node.op == Op::add_bias && g.node(node.inputs.at(0)).op == Op::matmul_nt &&
        only_consumer(node.inputs[0], Op::add_bias)) {
      absorbed[node.inputs[0]] = true;
      if (only_consumer(v, Op::relu)) absorbed[v] = true;
    } else if (node.op == Op::relu_grad && g.node(node.inputs.at(1)).op == Op::matmul &&
               only_consumer(node.inputs[1], Op::relu_grad)) {
      absorbed[node.inputs[1]] = true;
    }
  }
  FusedGraph out{Graph(g.gemm()), std::vector<NodeId>(g.size(), kAbsorbed), 0};
  const auto mapped = [&](NodeId v) { return out.map[v]; };
  for (const NodeId v : order) {
    const Node& node = g.node(v);
    if (absorbed[v]) continue;
    const bool after_gemm = !node.inputs.empty() && absorbed[node.inputs.back()];
    if (node.op == Op::relu && absorbed[node.inputs.at(0)]) {  // relu(add_bias(matmul_nt))
      const Node& bias = g.node(node.inputs[0]);
      const Node& gemm = g.node(bias.inputs[0]);
      out.map[v] = out.graph.linear(mapped(gemm.inputs.at(0)), mapped(gemm.inputs.at(1)),
                                    mapped(bias.inputs.at(1)), true);
    } else if (node.op == Op::add_bias && absorbed[node.inputs.at(0)]) {
      const Node& gemm = g.node(node.inputs[0]);
      out.map[v] = out.graph.linear(mapped(gemm.inputs.at(0)), mapped(gemm.inputs.at(1)),
                                    mapped(node.inputs.at(1)), false);
    } else if (node.op == Op::relu_grad && after_gemm) {
      const Node& gemm = g.node(node.inputs[1]);
      out.map[v] = out.graph.matmul_relu_grad(mapped(gemm.inputs.at(0)), mapped(gemm.inputs.at(1)),
                                              mapped(node.inputs[0]));
    } else {
      out.map[v] = copy_node(node, out);
      continue;
    }
    ++out.chains;
  }
  return out;
}

}  // namespace concurdl::df
