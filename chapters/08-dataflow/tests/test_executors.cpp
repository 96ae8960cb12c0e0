// Executors (executors.hpp) and fusion (fusion.hpp):
//  - on 300 random graphs each, every executor at 1, 2, 4 and 8 threads computes exactly the
//    values eager execution computes (the same bits: a node's arithmetic does not depend on
//    the order);
//  - every node runs exactly once, and only after all of its inputs have finished;
//  - an op that throws reaches the caller, and nothing that depends on it runs, without a hang;
//  - a cycle is refused before anything runs, naming a node on it;
//  - fusing the element-wise chains changes no value, and removes the chains' intermediates.
//   ch08_tests --gtest_filter='Executors*:Fusion*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/fusion.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/kernels/threads.hpp"
#include "executor_checks.hpp"

namespace {

using namespace concurdl::df;
using concurdl::testing::within_seconds;
using namespace concurdl::df::testing;

constexpr int kDeadline = 120;

class Executors : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    if (concurdl::testing::kThreadSanitizer && std::get<0>(GetParam()) == "tbb_flow")
      GTEST_SKIP() << "oneTBB synchronises inside uninstrumented libtbb: ThreadSanitizer would "
                      "report false races; the flow graph is tested in the default build";
    concurdl::kernels::set_compute_threads(1);
  }
  std::unique_ptr<Executor> make() {
    return make_executor(std::get<0>(GetParam()), std::get<1>(GetParam()));
  }
};

TEST_P(Executors, RandomGraphsGiveTheEagerValues) {
  auto exec = make();
  ASSERT_NE(exec, nullptr);
  within_seconds(kDeadline, [&] { random_graphs_give_the_eager_values(*exec); });
}

TEST_P(Executors, EveryNodeRunsOnceAfterItsInputs) {
  auto exec = make();
  within_seconds(kDeadline, [&] { every_node_runs_once_after_its_inputs(*exec); });
}

TEST_P(Executors, AThrowingOpReachesTheCallerAndItsDependentsNeverRun) {
  auto exec = make();
  within_seconds(kDeadline, [&] { a_throwing_op_reaches_the_caller(*exec); });
}

TEST_P(Executors, ACycleIsRefusedNamingANodeOnIt) {
  auto exec = make();
  a_cycle_is_refused(*exec);
}

INSTANTIATE_TEST_SUITE_P(All, Executors,
                         ::testing::Combine(::testing::ValuesIn(executor_kinds().names()),
                                            ::testing::Values(1, 2, 4, 8)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(Fusion, ChainsFuseAndNoValueChanges) {
  for (std::uint32_t seed = 1; seed <= 100; ++seed) {
    const Eager e = random_graph(seed, 40);
    const FusedGraph f = fuse_elementwise(e.graph());
    const std::vector<Tensor> got = SequentialExecutor().run(f.graph);
    for (NodeId n = 0; n < e.values().size(); ++n) {
      if (f.map[n] == kAbsorbed) continue;
      ASSERT_EQ(got[f.map[n]].data, e.value(n).data) << "seed " << seed << " node " << n;
    }
  }
  // A chain of 8: one fused node, 7 intermediates gone.
  Graph g;
  NodeId v = g.input(Tensor::filled(4, 4, 2.0f));
  const NodeId x = v;
  for (int k = 0; k < 8; ++k) v = k % 2 ? g.relu(v) : g.shift(g.scale(v, 0.5f), 0.25f);
  const FusedGraph f = fuse_elementwise(g);
  EXPECT_EQ(f.chains, 1u);
  EXPECT_EQ(f.graph.size(), 2u);
  EXPECT_NE(f.map[x], kAbsorbed);
  EXPECT_EQ(SequentialExecutor().run(f.graph)[f.map[v]].data, SequentialExecutor().run(g)[v].data);
}

TEST(Fusion, AValueTwoNodesReadIsKept) {
  Graph g;
  const NodeId x = g.input(Tensor::filled(2, 2, 1.0f));
  const NodeId a = g.scale(x, 2.0f);
  const NodeId b = g.relu(a);
  const NodeId c = g.add(a, b);  // a has two consumers: it must be materialised
  const FusedGraph f = fuse_elementwise(g);
  EXPECT_NE(f.map[a], kAbsorbed);
  EXPECT_EQ(f.chains, 0u);
  EXPECT_EQ(SequentialExecutor().run(f.graph)[f.map[c]].data, SequentialExecutor().run(g)[c].data);
}

}  // namespace
