// Fusion of element-wise chains. A chain of k unary element-wise ops (relu, scale, shift,
// square) run as k nodes reads and writes the whole tensor k times; fused into one node, each
// element goes through the k ops while it is in a register, and the tensor is read once and
// written once. For tensors larger than the caches the ops are bound by memory traffic, so the
// bytes model predicts a speedup near k (fusion's chart draws it beside the measurement).
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/df/graph.hpp"

namespace concurdl::df {

inline constexpr NodeId kAbsorbed = std::numeric_limits<NodeId>::max();

struct FusedGraph {
  Graph graph;
  // For every node of the original graph, the node of `graph` that holds its value, or
  // kAbsorbed for an intermediate of a fused chain or a GEMM inside its epilogue's node (its
  // value is never materialised).
  std::vector<NodeId> map;
  std::size_t chains = 0;  // fused nodes made
};

// The element-wise kernels fused and unfused nodes run, over raw buffers (the fusion experiment
// times them on preallocated arrays, so that it measures passes over memory, not allocation):
//   apply_op     one op, one pass: out[i] = op(in[i])          reads n floats, writes n
//   apply_chain  every op of the chain in one pass              reads n floats, writes n
// in and out may be the same array.
void apply_op(Op op, float alpha, const float* in, float* out, std::size_t n);
void apply_chain(std::span<const std::pair<Op, float>> chain, const float* in, float* out,
                 std::size_t n);

// The two ways to run a chain over n floats, a row each (ch08/fusion's `variant` axis). `run`
// reads `in` and writes a and/or b (scratch arrays of n floats each) and returns the array that
// holds the result; `passes` is how many times it reads and writes the n floats for k ops.
struct ChainRun : VariantInfo {
  const float* (*run)(std::span<const std::pair<Op, float>> chain, const float* in, float* a,
                      float* b, std::size_t n);
  std::size_t (*passes)(std::size_t k);
};
// k passes, each over the previous one's output: in -> a -> b -> a ...
const float* run_unfused(std::span<const std::pair<Op, float>> chain, const float* in, float* a,
                         float* b, std::size_t n);
// One pass: apply_chain from in to a.
const float* run_fused(std::span<const std::pair<Op, float>> chain, const float* in, float* a,
                       float* b, std::size_t n);
inline constexpr ChainRun kChainRunRows[] = {
    {{"unfused",
      "one node per op: k passes over memory, each reading the previous pass's output (2k n "
      "floats moved)"},
     &run_unfused,
     [](std::size_t k) { return k; }},
    {{"fused",
      "the chain as one node: each element goes through the k ops in a register, one pass over "
      "memory (2n floats moved whatever k)"},
     &run_fused,
     [](std::size_t) { return std::size_t{1}; }},
};
inline constexpr VariantTable kChainRuns{kChainRunRows};

// Every maximal chain of two or more unary element-wise nodes, each but the last with exactly
// one consumer (the next), becomes one fused node; everything else is copied. GraphError as
// topological_order for a graph that cannot run.
FusedGraph fuse_elementwise(const Graph& g);

// The element-wise op after a GEMM moved into the GEMM's epilogue (what XLA and TorchInductor do
// with a matmul's bias and activation): add_bias(matmul_nt(a, b), c) becomes linear(a, b, c), and
// with a relu as its only consumer linear_relu; relu_grad(h, matmul(a, b)) becomes
// matmul_relu_grad(a, b, h). Only where the GEMM's product has no other consumer (it is never
// materialised); everything else is copied. The same bits as the graph it came from. `chains`
// counts the fused nodes made.
FusedGraph fuse_epilogues(const Graph& g);

}  // namespace concurdl::df
