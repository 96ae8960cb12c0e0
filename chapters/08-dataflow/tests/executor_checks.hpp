// Checks every executor must pass, shared by the executors' tests (test_executors.cpp) and
// exercise 8.1's (test_exercises.cpp): each runs `exec` and reports through gtest assertions.
//   random_graphs_give_the_eager_values   300 random graphs: every node's value, bit for bit
//   every_node_runs_once_after_its_inputs  probes on one clock: once each, after all inputs
//   a_throwing_op_reaches_the_caller       the op's exception, and nothing after it runs
//   a_cycle_is_refused                     GraphError naming a node on the cycle; a missing input
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/df/executors.hpp"
#include "concurdl/df/graph.hpp"

namespace concurdl::df::testing {

inline constexpr std::size_t kSide = 6;  // every tensor kSide x kSide: every op fits every input

// A random graph: a few inputs, then nodes whose inputs are earlier nodes. Built through Eager,
// so the eager values come with it.
inline Eager random_graph(std::uint32_t seed, std::size_t nodes) {
  std::mt19937 rng(seed);
  Eager e(concurdl::kernels::GemmVersion::v2_ikj);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<NodeId> usable;  // nodes whose values are in [-1, 1] (not a raw product)
  for (int i = 0; i < 3; ++i) {
    Tensor t = Tensor::filled(kSide, kSide, 0.0f);
    for (float& x : t.data) x = value(rng);
    usable.push_back(e.input(std::move(t)));
  }
  while (e.values().size() < nodes) {
    const std::size_t have = usable.size();
    std::uniform_int_distribution<std::size_t> pick(have > 8 ? have - 8 : 0, have - 1);
    const NodeId a = usable[pick(rng)], b = usable[pick(rng)];
    // Every usable value stays in [-1, 1]: products are scaled back by the inner dimension,
    // sums halved, so no graph overflows into infinities (whose NaNs would compare unequal).
    NodeId v = 0;
    switch (rng() % 8) {
      case 0:
        v = e.call([&](Graph& g) { return g.scale(g.matmul(a, b), 1.0f / kSide); });
        break;
      case 1:
        v = e.call([&](Graph& g) { return g.scale(g.matmul_nt(a, b), 1.0f / kSide); });
        break;
      case 2:
        v = e.call([&](Graph& g) { return g.scale(g.add(a, b), 0.5f); });
        break;
      case 3:
        v = e.call([&](Graph& g) { return g.mul(a, b); });
        break;
      case 4:
        v = e.call([&](Graph& g) { return g.relu(a); });
        break;
      case 5:
        v = e.call([&](Graph& g) { return g.scale(a, 0.5f); });
        break;
      case 6:
        v = e.call([&](Graph& g) { return g.relu_grad(a, b); });
        break;
      default:
        v = e.call([&](Graph& g) { return g.shift(g.square(a), -0.25f); });
        break;
    }
    usable.push_back(v);
  }
  return e;
}

inline void random_graphs_give_the_eager_values(Executor& exec) {
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    const Eager e = random_graph(seed, 10 + seed % 50);
    const std::vector<Tensor> got = exec.run(e.graph());
    ASSERT_EQ(got.size(), e.values().size());
    for (NodeId n = 0; n < got.size(); ++n)
      ASSERT_EQ(got[n].data, e.value(n).data)
          << exec.name() << " seed " << seed << " node " << e.graph().node(n).name;
  }
}

inline void every_node_runs_once_after_its_inputs(Executor& exec) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    // Each node records when it started and finished on one global clock (a counter).
    Graph g;
    std::atomic<std::uint64_t> clock{0};
    constexpr std::size_t kNodes = 200;
    std::vector<std::atomic<int>> runs(kNodes);
    std::vector<std::uint64_t> started(kNodes), finished(kNodes);
    std::mt19937 rng(seed);
    for (NodeId v = 0; v < kNodes; ++v) {
      std::vector<NodeId> inputs;
      if (v > 0)
        for (unsigned k = rng() % 4; k > 0; --k) inputs.push_back(rng() % v);
      g.custom("probe " + std::to_string(v), inputs, [&, v](std::span<const Tensor* const>) {
        started[v] = clock.fetch_add(1) + 1;
        runs[v].fetch_add(1);
        finished[v] = clock.fetch_add(1) + 1;
        return Tensor::filled(1, 1, static_cast<float>(v));
      });
    }
    exec.run(g);
    for (NodeId v = 0; v < kNodes; ++v) {
      ASSERT_EQ(runs[v].load(), 1) << exec.name() << ": node " << v;
      for (const NodeId i : g.node(v).inputs)
        ASSERT_LT(finished[i], started[v]) << "node " << v << " started before input " << i;
    }
  }
}

inline void a_throwing_op_reaches_the_caller(Executor& exec) {
  Graph g;
  std::atomic<int> after{0};
  const NodeId x = g.input(Tensor::filled(2, 2, 1.0f));
  const NodeId bad = g.custom("bad op", {x}, [](std::span<const Tensor* const>) -> Tensor {
    throw std::runtime_error("bad op failed");
  });
  NodeId last = bad;
  for (int k = 0; k < 5; ++k)
    last = g.custom("after " + std::to_string(k), {last}, [&](std::span<const Tensor* const> in) {
      after.fetch_add(1);
      return *in[0];
    });
  for (int k = 0; k < 20; ++k) g.relu(x);  // independent work around it
  try {
    exec.run(g);
    ADD_FAILURE() << exec.name() << ": no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad op failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(after.load(), 0) << "nodes after the failed op ran";
  // The executor still works after it.
  Graph ok;
  ok.relu(ok.input(Tensor::filled(1, 1, -1.0f)));
  EXPECT_EQ(exec.run(ok).at(1).data.at(0), 0.0f);
}

inline void a_cycle_is_refused(Executor& exec) {
  Graph g;
  const NodeId x = g.input(Tensor::filled(2, 2, 1.0f));
  const NodeId a = g.relu(x);
  const NodeId b = g.relu(a);
  const NodeId c = g.relu(b);
  g.relu(x);             // not on the cycle
  g.set_inputs(a, {c});  // a <- c <- b <- a
  try {
    exec.run(g);
    ADD_FAILURE() << "a cycle ran";
  } catch (const GraphError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cycle"), std::string::npos) << what;
    EXPECT_TRUE(what.find(g.node(a).name) != std::string::npos ||
                what.find(g.node(b).name) != std::string::npos ||
                what.find(g.node(c).name) != std::string::npos)
        << what;
  }
  g.set_inputs(a, {42});
  EXPECT_THROW(exec.run(g), GraphError) << "a missing input";
}

}  // namespace concurdl::df::testing
