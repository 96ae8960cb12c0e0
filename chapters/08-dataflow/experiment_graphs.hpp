// Inputs and graphs that chapter 08's experiments (experiments*.cpp) and its exercise timings
// (exercises.cpp) share, so that exercise 8.1 is timed on the very graph ch08/executors runs.
// Internal to the chapter: not part of its include/ API.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/df/graph.hpp"

namespace concurdl::df {

// rows x cols values in [-1, 1) from the suite's own generator: the same on every machine.
inline Tensor pseudo_random(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  Tensor t = Tensor::filled(rows, cols, 0.0f);
  for (float& x : t.data) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return t;
}

// `width` chains of `depth` (GEMM with a weight of their own, scaled back, ReLU) from one input,
// summed pairwise at the end (wide); or one chain of width x depth of them (deep). Same node
// count, same arithmetic; only the dependencies differ.
inline Graph make_graph(const std::string& shape, std::size_t side, std::size_t width,
                        std::size_t depth) {
  Graph g;
  const NodeId x = g.input(pseudo_random(side, side, 1), "x");
  const float back = 1.0f / std::sqrt(static_cast<float>(side));
  std::uint32_t seed = 2;
  const auto layer = [&](NodeId v) {
    const NodeId w = g.input(pseudo_random(side, side, seed++));
    return g.relu(g.scale(g.matmul(v, w), back));
  };
  if (shape == "deep") {
    NodeId v = x;
    for (std::size_t i = 0; i < width * depth; ++i) v = layer(v);
    return g;
  }
  std::vector<NodeId> ends;
  for (std::size_t c = 0; c < width; ++c) {
    NodeId v = x;
    for (std::size_t d = 0; d < depth; ++d) v = layer(v);
    ends.push_back(v);
  }
  while (ends.size() > 1) {  // a tree of sums: log2(width) levels
    std::vector<NodeId> next;
    for (std::size_t i = 0; i + 1 < ends.size(); i += 2)
      next.push_back(g.add(ends[i], ends[i + 1]));
    if (ends.size() % 2) next.push_back(ends.back());
    ends = std::move(next);
  }
  return g;
}

}  // namespace concurdl::df
