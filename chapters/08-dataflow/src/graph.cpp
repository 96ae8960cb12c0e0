// The dataflow graph (graph.hpp): building, ordering, evaluating one node.
#include "concurdl/df/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <queue>

#include "concurdl/df/fusion.hpp"
#include "concurdl/kernels/ops.hpp"

namespace concurdl::df {

Tensor Tensor::filled(std::size_t rows, std::size_t cols, float v) {
  return {rows, cols, std::vector<float>(rows * cols, v)};
}

const char* op_name(Op op) {
  switch (op) {
    case Op::input:
      return "input";
    case Op::variable:
      return "variable";
    case Op::matmul:
      return "matmul";
    case Op::matmul_nt:
      return "matmul_nt";
    case Op::matmul_tn:
      return "matmul_tn";
    case Op::add:
      return "add";
    case Op::mul:
      return "mul";
    case Op::add_bias:
      return "add_bias";
    case Op::relu:
      return "relu";
    case Op::relu_grad:
      return "relu_grad";
    case Op::scale:
      return "scale";
    case Op::shift:
      return "shift";
    case Op::square:
      return "square";
    case Op::column_sum:
      return "column_sum";
    case Op::fused:
      return "fused";
    case Op::custom:
      return "custom";
    case Op::linear:
      return "linear";
    case Op::linear_relu:
      return "linear_relu";
    case Op::matmul_relu_grad:
      return "matmul_relu_grad";
  }
  return "?";
}

bool is_unary_elementwise(Op op) {
  return op == Op::relu || op == Op::scale || op == Op::shift || op == Op::square;
}

NodeId Graph::input(Tensor t, std::string name) {
  Node n;
  n.op = Op::input;
  n.constant = std::move(t);
  n.name = name.empty() ? fmt::format("input {}", nodes_.size()) : std::move(name);
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

NodeId Graph::variable(std::size_t rows, std::size_t cols, const float* data, std::string name) {
  Node n;
  n.op = Op::variable;
  n.constant.rows = rows;  // the shape only; the values are read from `external` at each run
  n.constant.cols = cols;
  n.external = data;
  n.name = name.empty() ? fmt::format("variable {}", nodes_.size()) : std::move(name);
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

void Graph::bind(NodeId v, const float* data) {
  if (v >= nodes_.size() || nodes_[v].op != Op::variable)
    throw GraphError(fmt::format("bind: node {} is not a variable", v));
  nodes_[v].external = data;
}

NodeId Graph::add_node(Op op, std::vector<NodeId> inputs, float alpha) {
  if (op == Op::input || op == Op::variable || op == Op::custom || op == Op::fused)
    throw std::invalid_argument(
        fmt::format("Graph::add_node: {} nodes have their own builder", op_name(op)));
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.alpha = alpha;
  n.name = fmt::format("{} {}", op_name(op), nodes_.size());
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

NodeId Graph::fused(NodeId a, std::vector<std::pair<Op, float>> chain) {
  for (const auto& [op, alpha] : chain)
    if (!is_unary_elementwise(op))
      throw std::invalid_argument(
          fmt::format("Graph::fused: {} is not a unary element-wise op", op_name(op)));
  Node n;
  n.op = Op::fused;
  n.inputs = {a};
  n.chain = std::move(chain);
  std::string ops;
  for (const auto& [op, alpha] : n.chain) {
    if (!ops.empty()) ops += '+';
    ops += op_name(op);
  }
  n.name = fmt::format("fused {} ({})", nodes_.size(), ops);
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

NodeId Graph::custom(std::string name, std::vector<NodeId> inputs,
                     std::function<Tensor(std::span<const Tensor* const>)> fn) {
  Node n;
  n.op = Op::custom;
  n.inputs = std::move(inputs);
  n.name = std::move(name);
  n.fn = std::move(fn);
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

void Graph::set_inputs(NodeId n, std::vector<NodeId> inputs) {
  nodes_.at(n).inputs = std::move(inputs);
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> out(nodes_.size());
  for (NodeId n = 0; n < nodes_.size(); ++n)
    for (const NodeId i : nodes_[n].inputs)
      if (i < nodes_.size()) out[i].push_back(n);
  return out;
}

std::vector<NodeId> topological_order(const Graph& g) {
  const std::size_t n = g.size();
  std::vector<std::size_t> missing(n, 0);
  for (NodeId v = 0; v < n; ++v) {
    for (const NodeId i : g.node(v).inputs)
      if (i >= n)
        throw GraphError(fmt::format("'{}' takes node {} as an input, and the graph has {} nodes",
                                     g.node(v).name, i, n));
    missing[v] = g.node(v).inputs.size();
  }
  const auto consumers = g.consumers();
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId v = 0; v < n; ++v)
    if (missing[v] == 0) ready.push(v);
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const NodeId v = ready.top();
    ready.pop();
    order.push_back(v);
    for (const NodeId c : consumers[v])
      if (--missing[c] == 0) ready.push(c);
  }
  if (order.size() == n) return order;
  // What is left waits on a cycle or on something that does: walk inputs that are still
  // waiting until a node repeats; that node is on a cycle.
  NodeId v = 0;
  while (missing[v] == 0) ++v;
  std::vector<bool> seen(n, false);
  while (!seen[v]) {
    seen[v] = true;
    for (const NodeId i : g.node(v).inputs)
      if (missing[i] != 0) {
        v = i;
        break;
      }
  }
  throw GraphError(
      fmt::format("the graph has a cycle through '{}': no order runs every node after its inputs",
                  g.node(v).name));
}

namespace {

void need(bool ok, const Node& node, std::span<const Tensor* const> in) {
  if (ok) return;
  std::string shapes;
  for (const Tensor* t : in)
    shapes += fmt::format("{}{}x{}", shapes.empty() ? "" : ", ", t->rows, t->cols);
  throw GraphError(fmt::format("'{}': its inputs' shapes ({}) do not fit {}", node.name, shapes,
                               op_name(node.op)));
}

float apply_unary(Op op, float alpha, float x) {
  switch (op) {
    case Op::relu:
      return x > 0.0f ? x : 0.0f;
    case Op::scale:
      return alpha * x;
    case Op::shift:
      return x + alpha;
    case Op::square:
      return x * x;
    default:
      return x;
  }
}

}  // namespace

void evaluate_into(const Graph& g, NodeId n, std::span<const Tensor* const> in, Tensor& out) {
  evaluate_node(g.node(n), g.gemm(), in, out);
}

void evaluate_node(const Node& node, kernels::GemmVersion gemm_version,
                   std::span<const Tensor* const> in, Tensor& out) {
  if (in.size() != node.inputs.size())
    throw GraphError(fmt::format("'{}': {} input values for {} inputs", node.name, in.size(),
                                 node.inputs.size()));
  using kernels::Trans;
  // out takes the shape; its buffer is reused when it is large enough (no allocation, no page
  // faults: a run of an executor whose values are kept allocates nothing after the first).
  const auto shape = [&](std::size_t rows, std::size_t cols) {
    out.rows = rows;
    out.cols = cols;
    out.data.resize(rows * cols);
  };
  const auto unary = [&](auto f) {
    need(in.size() == 1, node, in);
    shape(in[0]->rows, in[0]->cols);
    const float* a = in[0]->data.data();
    float* y = out.data.data();
    for (std::size_t i = 0; i < out.size(); ++i) y[i] = f(a[i]);
  };
  const auto binary = [&](auto f) {
    need(in.size() == 2 && in[0]->rows == in[1]->rows && in[0]->cols == in[1]->cols, node, in);
    shape(in[0]->rows, in[0]->cols);
    const float* a = in[0]->data.data();
    const float* b = in[1]->data.data();
    float* y = out.data.data();
    for (std::size_t i = 0; i < out.size(); ++i) y[i] = f(a[i], b[i]);
  };
  // The product of the first two inputs; a third is the epilogue's operand (linear: the bias,
  // 1 x n; matmul_relu_grad: the ReLU's output, m x n), `finish` says what it does with it.
  enum class Finish { none, bias, bias_relu, relu_grad };
  const auto gemm = [&](Trans ta, Trans tb, Finish finish = Finish::none) {
    need(in.size() == (finish == Finish::none ? 2U : 3U), node, in);
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    const std::size_t m = ta == Trans::no ? a.rows : a.cols;
    const std::size_t k = ta == Trans::no ? a.cols : a.rows;
    const std::size_t kb = tb == Trans::no ? b.rows : b.cols;
    const std::size_t nn = tb == Trans::no ? b.cols : b.rows;
    need(k == kb, node, in);
    if (finish == Finish::none) {
      shape(m, nn);
      kernels::gemm(gemm_version, ta, tb, m, nn, k, 1.0f, a.data.data(), a.cols, b.data.data(),
                    b.cols, 0.0f, out.data.data(), nn);
      return;
    }
    const Tensor& c = *in[2];
    kernels::GemmEpilogue e;
    if (finish == Finish::relu_grad) {
      need(c.rows == m && c.cols == nn, node, in);
      e.relu_of = c.data.data();
      e.ld_relu_of = nn;
    } else {
      need(c.rows == 1 && c.cols == nn, node, in);
      e.bias = c.data.data();
      e.relu = finish == Finish::bias_relu;
    }
    shape(m, nn);
    kernels::gemm(gemm_version, ta, tb, m, nn, k, 1.0f, a.data.data(), a.cols, b.data.data(),
                  b.cols, 0.0f, out.data.data(), nn, e);
  };
  switch (node.op) {
    case Op::input:
      shape(node.constant.rows, node.constant.cols);
      std::copy(node.constant.data.begin(), node.constant.data.end(), out.data.begin());
      return;
    case Op::variable:
      if (node.external == nullptr)
        throw GraphError(fmt::format("'{}': variable not bound to memory", node.name));
      shape(node.constant.rows, node.constant.cols);
      std::copy(node.external, node.external + out.size(), out.data.begin());
      return;
    case Op::matmul:
      return gemm(Trans::no, Trans::no);
    case Op::matmul_nt:
      return gemm(Trans::no, Trans::yes);
    case Op::matmul_tn:
      return gemm(Trans::yes, Trans::no);
    case Op::add:
      return binary([](float a, float b) { return a + b; });
    case Op::mul:
      return binary([](float a, float b) { return a * b; });
    case Op::relu_grad:
      return binary([](float a, float b) { return a > 0.0f ? b : 0.0f; });
    case Op::add_bias:
      need(in.size() == 2 && in[1]->rows == 1 && in[1]->cols == in[0]->cols, node, in);
      shape(in[0]->rows, in[0]->cols);
      std::copy(in[0]->data.begin(), in[0]->data.end(), out.data.begin());
      kernels::add_bias_rows(out.data.data(), out.rows, out.cols, out.cols, in[1]->data.data());
      return;
    case Op::relu:
    case Op::scale:
    case Op::shift:
    case Op::square:
      return unary([&](float x) { return apply_unary(node.op, node.alpha, x); });
    case Op::column_sum:
      need(in.size() == 1, node, in);
      shape(1, in[0]->cols);
      kernels::column_sums(in[0]->data.data(), in[0]->rows, in[0]->cols, in[0]->cols,
                           out.data.data());
      return;
    case Op::fused:
      // One pass over memory: each block of elements goes through the whole chain in cache.
      need(in.size() == 1, node, in);
      shape(in[0]->rows, in[0]->cols);
      apply_chain(node.chain, in[0]->data.data(), out.data.data(), out.size());
      return;
    case Op::custom:
      out = node.fn(in);
      return;
    case Op::linear:
      return gemm(Trans::no, Trans::yes, Finish::bias);
    case Op::linear_relu:
      return gemm(Trans::no, Trans::yes, Finish::bias_relu);
    case Op::matmul_relu_grad:
      return gemm(Trans::no, Trans::no, Finish::relu_grad);
  }
  throw GraphError(fmt::format("'{}': unknown op", node.name));
}

Tensor evaluate(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  Tensor out;
  evaluate_into(g, n, in, out);
  return out;
}

double node_bytes(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  if (g.node(n).op == Op::input || g.node(n).op == Op::variable) return 0;
  double bytes = 0;
  for (const Tensor* t : in) bytes += static_cast<double>(t->size());
  const Node& node = g.node(n);
  double out = in.empty() ? 0 : static_cast<double>(in[0]->size());
  if (node.op == Op::column_sum) out = in.empty() ? 0 : static_cast<double>(in[0]->cols);
  const bool b_transposed =
      node.op == Op::matmul_nt || node.op == Op::linear || node.op == Op::linear_relu;
  if (b_transposed || node.op == Op::matmul || node.op == Op::matmul_tn ||
      node.op == Op::matmul_relu_grad) {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    out = static_cast<double>(node.op == Op::matmul_tn ? a.cols : a.rows) *
          static_cast<double>(b_transposed ? b.rows : b.cols);
  }
  return (bytes + out) * sizeof(float);
}

namespace {
// out[i] = f(in[i]). In place (in == out) it is a loop over one array, which the compiler
// vectorises as it is; out of place it vectorises behind a check that the arrays do not
// overlap, which an in-place call would fail, falling back to one element at a time.
template <class F>
void map_elements(const float* in, float* out, std::size_t n, F f) {
  if (in == out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = f(out[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = f(in[i]);
  }
}
}  // namespace

void apply_op(Op op, float alpha, const float* in, float* out, std::size_t n) {
  switch (op) {  // one loop per op, so that each vectorises on its own
    case Op::relu:
      return map_elements(in, out, n, [](float x) { return x > 0.0f ? x : 0.0f; });
    case Op::scale:
      return map_elements(in, out, n, [alpha](float x) { return alpha * x; });
    case Op::shift:
      return map_elements(in, out, n, [alpha](float x) { return x + alpha; });
    case Op::square:
      return map_elements(in, out, n, [](float x) { return x * x; });
    default:
      throw std::invalid_argument(
          fmt::format("apply_op: {} is not unary element-wise", op_name(op)));
  }
}

void apply_chain(std::span<const std::pair<Op, float>> chain, const float* in, float* out,
                 std::size_t n) {
  for (const auto& [op, alpha] : chain)
    if (!is_unary_elementwise(op))
      throw std::invalid_argument(
          fmt::format("apply_chain: {} is not unary element-wise", op_name(op)));
  // Four vector registers at a time (64 floats with AVX-512; the compiler splits the vectors
  // into two or four registers each on narrower machines): load them, run the whole chain on
  // them op by op, store them. Memory sees one read and one write per element whatever k is,
  // and the k ops are k vector instructions per register, not k passes over a block in cache
  // (the first version ran each op over a block of 8192 floats in L1: 2 loads and a store per
  // op per element, which made a fused chain of 8 compute-bound at half the memory's speed).
  // V stays inside this function: a vector passed by value across a call changes the ABI
  // with the instruction set, which the compiler warns about.
  using V = float __attribute__((vector_size(64)));
  constexpr std::size_t kRegs = 4, kStep = kRegs * sizeof(V) / sizeof(float);
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    V r[kRegs];
    std::memcpy(r, in + i, sizeof r);  // before any store: in may be out
    for (const auto& [op, alpha] : chain) {
      switch (op) {
        case Op::relu:
          for (V& x : r) x = x > V{} ? x : V{};
          break;
        case Op::scale:
          for (V& x : r) x = alpha * x;
          break;
        case Op::shift:
          for (V& x : r) x = x + alpha;
          break;
        default:  // Op::square (checked above)
          for (V& x : r) x = x * x;
          break;
      }
    }
    std::memcpy(out + i, r, sizeof r);
  }
  for (; i < n; ++i) {  // the tail, one element at a time
    float x = in[i];
    for (const auto& [op, alpha] : chain) x = apply_unary(op, alpha, x);
    out[i] = x;
  }
}

const float* run_unfused(std::span<const std::pair<Op, float>> chain, const float* in, float* a,
                         float* b, std::size_t n) {
  const float* src = in;
  float* dst = a;
  for (const auto& [op, alpha] : chain) {
    apply_op(op, alpha, src, dst, n);
    src = dst;
    dst = dst == a ? b : a;
  }
  return src;
}

const float* run_fused(std::span<const std::pair<Op, float>> chain, const float* in, float* a,
                       float* /*b*/, std::size_t n) {
  apply_chain(chain, in, a, n);
  return a;
}

void Eager::compute(NodeId n) {
  const Node& node = g_.node(n);
  std::vector<const Tensor*> in;
  for (const NodeId i : node.inputs) {
    if (i >= values_.size())
      throw GraphError(
          fmt::format("'{}': eager ops take values already computed (node {})", node.name, i));
    in.push_back(&values_[i]);
  }
  Tensor out;
  if (!spare_.empty()) {
    out = std::move(spare_.back());
    spare_.pop_back();
  }
  evaluate_into(g_, n, in, out);
  values_.push_back(std::move(out));
}

void Eager::reset() {
  g_ = Graph(g_.gemm());
  // Reversed, so that the next step's first op takes the buffer this step's first op had.
  for (auto it = values_.rbegin(); it != values_.rend(); ++it) spare_.push_back(std::move(*it));
  values_.clear();
}

}  // namespace concurdl::df
