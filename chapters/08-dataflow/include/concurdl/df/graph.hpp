// A small dataflow graph over the kernels of `kernels/`: nodes are operations on row-major float
// matrices (GEMM, element-wise ops, reductions), edges are the values one node hands the next.
// Built eagerly (Eager: each op runs as it is called, as PyTorch's eager mode does) or recorded
// (Graph: the ops are only written down, then an executor runs them, as TensorFlow's graph mode
// and MXNet's engine do). Recording is what lets an executor see which ops are independent and
// run them at once (inter-op parallelism), and what lets a pass fuse a chain of element-wise
// ops into one (fusion.hpp).
//
//   Graph g;
//   const NodeId x = g.input(Tensor::filled(64, 64, 1.0f));
//   const NodeId w = g.input(Tensor::filled(64, 64, 0.5f));
//   const NodeId y = g.relu(g.matmul(x, w));
//   const std::vector<Tensor> v = SequentialExecutor().run(g);   // v[y] is relu(x w)
//
// A node's value depends only on its inputs' values: however an executor orders or overlaps the
// nodes, every node computes the same bits (the tests hold every executor to eager execution).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/gemm.hpp"

namespace concurdl::df {

struct Tensor {
  std::size_t rows = 0, cols = 0;
  std::vector<float> data;  // rows x cols, row-major
  static Tensor filled(std::size_t rows, std::size_t cols, float v);
  std::size_t size() const { return rows * cols; }
};

enum class Op {
  input,       // a constant given when the graph was built
  variable,    // read from memory outside the graph at each run (bind): parameters, a batch
  matmul,      // a b                      (m x k) (k x n)
  matmul_nt,   // a bᵀ                     (m x k) (n x k)
  matmul_tn,   // aᵀ b                     (k x m) (k x n)
  add,         // a + b                    same shapes
  mul,         // a ⊙ b                    same shapes
  add_bias,    // a + b on every row       (m x n) (1 x n)
  relu,        // max(a, 0)
  relu_grad,   // b ⊙ (a > 0): the gradient b through relu(a)
  scale,       // alpha a
  shift,       // a + alpha
  square,      // a ⊙ a
  column_sum,  // 1 x n: the sum of a's rows
  fused,       // a chain of unary element-wise ops in one pass (fusion.hpp)
  custom,      // a function of the inputs (tests: an op that throws, one that records order)
  // A GEMM with the element-wise op that follows it done in its epilogue, on each tile of the
  // product while it is in cache (kernels::GemmEpilogue; fuse_epilogues in fusion.hpp makes
  // them): the bits of the two nodes they replace, without the product's round trip to memory.
  linear,            // a bᵀ + c on every row      (m x k) (n x k) (1 x n): matmul_nt, add_bias
  linear_relu,       // relu(a bᵀ + c)                              and then relu
  matmul_relu_grad,  // (a b) ⊙ (c > 0)           (m x k) (k x n) (m x n): relu_grad(c, a b)
};
const char* op_name(Op op);
// The unary element-wise ops a fused node may chain: relu, scale, shift, square.
bool is_unary_elementwise(Op op);

using NodeId = std::size_t;

struct Node {
  Op op = Op::input;
  std::vector<NodeId> inputs;
  float alpha = 0;                          // scale, shift
  std::string name;                         // "matmul 3": what error messages and timelines call it
  Tensor constant;                          // input (a variable: its shape only)
  const float* external = nullptr;          // variable: where its rows x cols floats are
  std::vector<std::pair<Op, float>> chain;  // fused: its ops, in order
  std::function<Tensor(std::span<const Tensor* const>)> fn;  // custom
};

// Thrown for a graph that cannot run: a cycle (naming a node on it), an input that does not
// exist, shapes that do not fit (naming the node).
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Graph {
 public:
  explicit Graph(kernels::GemmVersion gemm = kernels::GemmVersion::openblas) : gemm_(gemm) {}

  NodeId input(Tensor t, std::string name = "");
  // A rows x cols value read from `data` each time the node runs (TensorFlow's variables and
  // feeds): the graph is recorded once and run on new parameters and batches. The memory must
  // hold its values, unchanged, while a run is in progress; bind() points it elsewhere between
  // runs; a run of an unbound variable is a GraphError naming it.
  NodeId variable(std::size_t rows, std::size_t cols, const float* data = nullptr,
                  std::string name = "");
  void bind(NodeId variable, const float* data);
  NodeId matmul(NodeId a, NodeId b) { return add_node(Op::matmul, {a, b}); }
  NodeId matmul_nt(NodeId a, NodeId b) { return add_node(Op::matmul_nt, {a, b}); }
  NodeId matmul_tn(NodeId a, NodeId b) { return add_node(Op::matmul_tn, {a, b}); }
  NodeId add(NodeId a, NodeId b) { return add_node(Op::add, {a, b}); }
  NodeId mul(NodeId a, NodeId b) { return add_node(Op::mul, {a, b}); }
  NodeId add_bias(NodeId a, NodeId b) { return add_node(Op::add_bias, {a, b}); }
  NodeId relu(NodeId a) { return add_node(Op::relu, {a}); }
  NodeId relu_grad(NodeId a, NodeId g) { return add_node(Op::relu_grad, {a, g}); }
  NodeId scale(NodeId a, float alpha) { return add_node(Op::scale, {a}, alpha); }
  NodeId shift(NodeId a, float alpha) { return add_node(Op::shift, {a}, alpha); }
  NodeId square(NodeId a) { return add_node(Op::square, {a}); }
  NodeId column_sum(NodeId a) { return add_node(Op::column_sum, {a}); }
  NodeId linear(NodeId a, NodeId b, NodeId bias, bool relu) {
    return add_node(relu ? Op::linear_relu : Op::linear, {a, b, bias});
  }
  NodeId matmul_relu_grad(NodeId a, NodeId b, NodeId of) {
    return add_node(Op::matmul_relu_grad, {a, b, of});
  }
  NodeId fused(NodeId a, std::vector<std::pair<Op, float>> chain);
  NodeId custom(std::string name, std::vector<NodeId> inputs,
                std::function<Tensor(std::span<const Tensor* const>)> fn);
  // Any op by its enum (inputs may name nodes not yet added: a later set_inputs or add_node
  // must add them, or validate() says which is missing).
  NodeId add_node(Op op, std::vector<NodeId> inputs, float alpha = 0);
  // Rewires a node's inputs (tests build cycles with it).
  void set_inputs(NodeId n, std::vector<NodeId> inputs);

  std::size_t size() const { return nodes_.size(); }
  const Node& node(NodeId n) const { return nodes_.at(n); }
  kernels::GemmVersion gemm() const { return gemm_; }
  // consumers()[n]: the nodes that take n as an input (once per edge).
  std::vector<std::vector<NodeId>> consumers() const;

 private:
  std::vector<Node> nodes_;
  kernels::GemmVersion gemm_;
};

// Inputs that exist, and an order in which every node comes after its inputs (Kahn's
// algorithm; among ready nodes, the lowest id first). GraphError naming a node on a cycle, or
// a missing input, otherwise.
std::vector<NodeId> topological_order(const Graph& g);

// One node's value from its inputs' (in the node's input order). GraphError naming the node
// when the shapes do not fit; what a custom op throws passes through.
Tensor evaluate(const Graph& g, NodeId n, std::span<const Tensor* const> inputs);
// The same into `out`, reusing its buffer when it is large enough (an executor that keeps its
// values between runs allocates nothing after the first: no page faults, and no mmap lock that
// would serialise the threads of a parallel run).
void evaluate_into(const Graph& g, NodeId n, std::span<const Tensor* const> inputs, Tensor& out);
// The same for a node outside a graph (the asynchronous engine keeps its own).
void evaluate_node(const Node& node, kernels::GemmVersion gemm,
                   std::span<const Tensor* const> inputs, Tensor& out);

// The bytes a node's evaluation reads and writes (its inputs once, its output once): the
// memory-traffic model of fusion's chart. Matmuls count their operands and result once too.
double node_bytes(const Graph& g, NodeId n, std::span<const Tensor* const> inputs);

// Eager execution: every op runs when it is added and its value is kept. Builds the same Graph
// as it goes (graph()), so the recorded run of the same calls can be compared with it.
class Eager {
 public:
  explicit Eager(kernels::GemmVersion gemm = kernels::GemmVersion::openblas) : g_(gemm) {}
  // Adds what `add` adds to the graph and runs it at once, in the order added; returns what
  // `add` returns. E.g. call([&](Graph& g) { return g.relu(g.matmul(x, w)); }).
  template <class F>
  NodeId call(F&& add) {
    const NodeId n = add(g_);
    while (values_.size() < g_.size()) compute(values_.size());
    return n;
  }
  NodeId input(Tensor t) {
    return call([&](Graph& g) { return g.input(std::move(t)); });
  }
  const Tensor& value(NodeId n) const { return values_.at(n); }
  // Forgets every op and value, and keeps the values' buffers for the ops added next (as
  // AsyncEngine::reset does): a step after a reset allocates no fresh pages.
  void reset();
  const std::vector<Tensor>& values() const { return values_; }
  const Graph& graph() const { return g_; }

 private:
  void compute(NodeId n);
  Graph g_;
  std::vector<Tensor> values_;
  std::vector<Tensor> spare_;  // buffers of values forgotten by reset()
};

}  // namespace concurdl::df
