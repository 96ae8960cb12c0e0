// The graph itself (graph.hpp): each op's value against a direct computation, shapes that do
// not fit refused by the node's name, eager values equal to a recorded run's, the topological
// order, and the bytes model.
//   ch08_tests --gtest_filter='Graph*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/fusion.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/df/mlp_graph.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/mlp.hpp"

namespace {

using namespace concurdl::df;
using nn_spec = concurdl::nn::MlpSpec;

Tensor counting(std::size_t rows, std::size_t cols, float start) {
  Tensor t = Tensor::filled(rows, cols, 0.0f);
  for (std::size_t i = 0; i < t.size(); ++i) t.data[i] = start + static_cast<float>(i);
  return t;
}

TEST(Graph, OpsComputeWhatTheySay) {
  Graph g(concurdl::kernels::GemmVersion::v2_ikj);
  const NodeId a = g.input(counting(2, 3, 1.0f));  // [1 2 3; 4 5 6]
  const NodeId b = g.input(counting(3, 2, 0.0f));  // [0 1; 2 3; 4 5]
  const NodeId mm = g.matmul(a, b);                // [16 22; 34 49]
  const NodeId nt = g.matmul_nt(a, a);             // a aᵀ = [14 32; 32 77]
  const NodeId tn = g.matmul_tn(a, a);             // aᵀ a, 3 x 3
  const NodeId bias = g.add_bias(a, g.input(counting(1, 3, 10.0f)));
  const NodeId sum = g.column_sum(a);
  const NodeId r = g.relu(g.shift(a, -3.5f));
  const NodeId rg = g.relu_grad(g.shift(a, -3.5f), a);
  const NodeId sq = g.square(g.scale(a, 2.0f));
  const std::vector<Tensor> v = SequentialExecutor().run(g);
  EXPECT_EQ(v[mm].data, (std::vector<float>{16, 22, 34, 49}));
  EXPECT_EQ(v[nt].data, (std::vector<float>{14, 32, 32, 77}));
  EXPECT_EQ(v[tn].rows, 3u);
  EXPECT_EQ(v[tn].data[0], 17.0f);  // 1·1 + 4·4
  EXPECT_EQ(v[bias].data, (std::vector<float>{11, 13, 15, 14, 16, 18}));
  EXPECT_EQ(v[sum].data, (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(v[r].data, (std::vector<float>{0, 0, 0, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(v[rg].data, (std::vector<float>{0, 0, 0, 4, 5, 6}));
  EXPECT_EQ(v[sq].data, (std::vector<float>{4, 16, 36, 64, 100, 144}));
}

TEST(Graph, ShapesThatDoNotFitAreRefusedByName) {
  Graph g;
  const NodeId a = g.input(counting(2, 3, 0.0f));
  const NodeId m = g.matmul(a, a);  // (2x3)(2x3)
  try {
    SequentialExecutor().run(g);
    FAIL() << "a 2x3 by 2x3 product ran";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find(g.node(m).name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2x3, 2x3"), std::string::npos) << e.what();
  }
}

TEST(Graph, EagerValuesAreARecordedRunsValues) {
  Eager e;
  const NodeId x = e.input(counting(4, 4, -8.0f));
  const NodeId w = e.input(counting(4, 4, 0.5f));
  const NodeId h = e.call([&](Graph& g) { return g.relu(g.matmul(x, w)); });
  e.call([&](Graph& g) { return g.column_sum(g.mul(h, h)); });
  const std::vector<Tensor> recorded = SequentialExecutor().run(e.graph());
  ASSERT_EQ(recorded.size(), e.values().size());
  for (NodeId n = 0; n < recorded.size(); ++n) EXPECT_EQ(recorded[n].data, e.value(n).data);
  // An eager op cannot take a value that does not exist yet.
  EXPECT_THROW(e.call([&](Graph& g) { return g.relu(99); }), GraphError);
}

TEST(Graph, TopologicalOrderPutsInputsFirst) {
  Graph g;
  const NodeId x = g.input(Tensor::filled(1, 1, 1.0f));
  const NodeId a = g.add_node(Op::relu, {3});  // its input comes later in the list
  const NodeId b = g.relu(x);
  const NodeId c = g.relu(b);
  ASSERT_EQ(c, 3u);
  const std::vector<NodeId> order = topological_order(g);
  const auto pos = [&](NodeId n) {
    return std::find(order.begin(), order.end(), n) - order.begin();
  };
  EXPECT_LT(pos(c), pos(a));
  EXPECT_LT(pos(b), pos(c));
  EXPECT_LT(pos(x), pos(b));
}

TEST(Graph, BytesModelCountsInputsAndOutputOnce) {
  Graph g;
  const NodeId a = g.input(Tensor::filled(10, 10, 1.0f));
  const NodeId s = g.scale(a, 2.0f);
  const NodeId m = g.matmul(a, a);
  const NodeId c = g.column_sum(a);
  const std::vector<Tensor> v = SequentialExecutor().run(g);
  const Tensor* in1[] = {&v[a]};
  const Tensor* in2[] = {&v[a], &v[a]};
  EXPECT_EQ(node_bytes(g, s, in1), 200.0 * 4);
  EXPECT_EQ(node_bytes(g, m, in2), 300.0 * 4);
  EXPECT_EQ(node_bytes(g, c, in1), 110.0 * 4);
}

// The MLP recorded as a graph computes nn::Mlp's gradients, whichever executor runs it.
TEST(GraphMlp, GradientsAreKernelsNnsUnderEveryExecutor) {
  concurdl::kernels::set_compute_threads(1);
  const nn_spec spec{{20, 16, 12, 10}};
  concurdl::nn::Mlp model(spec, 7, concurdl::kernels::GemmVersion::v2_ikj);
  constexpr std::size_t rows = 9;
  std::vector<float> x(rows * 20);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>((i * 7) % 10);
  model.forward_backward(x.data(), labels.data(), rows);
  const MlpGraph mg = record_mlp(model, x.data(), labels.data(), rows);
  for (const std::string& name : executor_kinds().names()) {
    // libtbb synchronises where ThreadSanitizer cannot see (the flow graph runs in the other
    // builds).
    if (concurdl::testing::kThreadSanitizer && name == "tbb_flow") continue;
    auto exec = make_executor(name, 2);
    const std::vector<Tensor>& v = exec->run(mg.graph);
    for (std::size_t l = 0; l < 3; ++l) {
      const auto want = model.layer_gradient(l);
      const Tensor& dw = v[mg.dw[l]];
      const Tensor& db = v[mg.db[l]];
      ASSERT_EQ(dw.size(), want.w.rows * want.w.cols) << name << " layer " << l;
      for (std::size_t i = 0; i < dw.size(); ++i)
        ASSERT_NEAR(dw.data[i], want.w.data[i], 1e-5f * (1.0f + std::fabs(want.w.data[i])))
            << name << " layer " << l << " dW " << i;
      ASSERT_EQ(db.size(), want.b.size());
      for (std::size_t i = 0; i < db.size(); ++i)
        ASSERT_NEAR(db.data[i], want.b[i], 1e-5f * (1.0f + std::fabs(want.b[i])))
            << name << " layer " << l << " db " << i;
    }
  }
}

// Trained on the graph, step after step, the model's parameters stay nn's: five SGD steps on the
// same batches through GraphTrainer (each executor) and through nn::Mlp::forward_backward.
TEST(GraphMlp, TrainingOnTheGraphGivesNnsParameters) {
  concurdl::kernels::set_compute_threads(1);
  const nn_spec spec{{20, 16, 12, 10}};
  constexpr std::size_t rows = 8, steps = 5;
  std::vector<float> x(steps * rows * 20);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.29f * static_cast<float>(i));
  std::vector<std::uint8_t> labels(steps * rows);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::uint8_t>((i * 3) % 10);
  concurdl::nn::Mlp want(spec, 11, concurdl::kernels::GemmVersion::v2_ikj);
  concurdl::nn::Sgd sgd(want.parameters().size(), {});
  std::vector<double> losses;
  for (std::size_t s = 0; s < steps; ++s) {
    losses.push_back(
        want.forward_backward(x.data() + s * rows * 20, labels.data() + s * rows, rows));
    sgd.step(want.parameters(), want.gradients());
  }
  for (const std::string& name : executor_kinds().names()) {
    if (concurdl::testing::kThreadSanitizer && name == "tbb_flow") continue;
    for (const Fusion fusion : {Fusion::epilogues, Fusion::none}) {
      const std::string what =
          name + (fusion == Fusion::none ? ", as recorded" : ", epilogues fused");
      concurdl::nn::Mlp model(spec, 11, concurdl::kernels::GemmVersion::v2_ikj);
      auto exec = make_executor(name, 2);
      GraphTrainer trainer(model, rows, *exec, {}, fusion);
      for (std::size_t s = 0; s < steps; ++s) {
        const double loss = trainer.step(x.data() + s * rows * 20, labels.data() + s * rows);
        EXPECT_NEAR(loss, losses[s], 1e-5 * (1 + losses[s])) << what << " step " << s;
      }
      const auto got = model.parameters();
      const auto ref = want.parameters();
      ASSERT_EQ(got.size(), ref.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])))
            << what << " parameter " << i;
    }
  }
}

// Fusing the MLP's epilogues leaves one GEMM node where there were two or three (forward:
// linear_relu per hidden layer, linear for the logits; backward: matmul_relu_grad below the top
// layer) and changes no bit of any value that is still there, whichever GEMM runs them.
TEST(Fusion, EpiloguesFuseTheMlpAndNoValueChanges) {
  concurdl::kernels::set_compute_threads(1);
  const nn_spec spec{{20, 16, 12, 10}};
  constexpr std::size_t rows = 9;
  std::vector<float> x(rows * 20);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.41f * static_cast<float>(i));
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 10);
  using concurdl::kernels::GemmVersion;
  for (const GemmVersion v :
       {GemmVersion::v2_ikj, GemmVersion::v4_register, GemmVersion::openblas}) {
    concurdl::nn::Mlp model(spec, 5, v);
    const MlpGraph mg = record_mlp(model, x.data(), labels.data(), rows);
    const FusedGraph f = fuse_epilogues(mg.graph);
    EXPECT_EQ(f.chains, 5u);                         // 3 forward, 2 backward
    EXPECT_EQ(f.graph.size(), mg.graph.size() - 7);  // 2 x 2 + 1 forward, 2 backward absorbed
    std::size_t fused_ops = 0;
    for (NodeId n = 0; n < f.graph.size(); ++n) {
      const Op op = f.graph.node(n).op;
      fused_ops += op == Op::linear || op == Op::linear_relu || op == Op::matmul_relu_grad;
      EXPECT_NE(op, Op::add_bias);
      EXPECT_NE(op, Op::relu);
      EXPECT_NE(op, Op::relu_grad);
    }
    EXPECT_EQ(fused_ops, 5u);
    const std::vector<Tensor> want = SequentialExecutor().run(mg.graph);
    const std::vector<Tensor> got = SequentialExecutor().run(f.graph);
    for (NodeId n = 0; n < mg.graph.size(); ++n) {
      if (f.map[n] == kAbsorbed) continue;
      ASSERT_EQ(got[f.map[n]].data, want[n].data) << mg.graph.node(n).name;
    }
    // The trainer's graph: the same, its gradients' ids remapped.
    const MlpGraph fm = fuse_epilogues(mg);
    for (std::size_t l = 0; l < 3; ++l) {
      EXPECT_EQ(got[fm.dw[l]].data, want[mg.dw[l]].data) << "layer " << l;
      EXPECT_EQ(got[fm.db[l]].data, want[mg.db[l]].data) << "layer " << l;
    }
  }
}

// A GEMM's product that another node reads too is materialised: nothing fuses.
TEST(Fusion, AGemmReadTwiceKeepsItsOwnNode) {
  Graph g;
  const NodeId a = g.input(Tensor::filled(3, 4, 0.5f));
  const NodeId w = g.input(Tensor::filled(5, 4, -0.25f));
  const NodeId b = g.input(Tensor::filled(1, 5, 1.0f));
  const NodeId m = g.matmul_nt(a, w);
  const NodeId y = g.relu(g.add_bias(m, b));
  const NodeId s = g.column_sum(m);  // m's second reader
  const FusedGraph f = fuse_epilogues(g);
  EXPECT_EQ(f.chains, 0u);
  EXPECT_NE(f.map[m], kAbsorbed);
  const std::vector<Tensor> want = SequentialExecutor().run(g);
  const std::vector<Tensor> got = SequentialExecutor().run(f.graph);
  EXPECT_EQ(got[f.map[y]].data, want[y].data);
  EXPECT_EQ(got[f.map[s]].data, want[s].data);
}

// The fused ops refuse shapes that do not fit, naming the node, as the others do.
TEST(Graph, FusedGemmsRefuseABiasOfTheWrongShape) {
  Graph g;
  const NodeId a = g.input(Tensor::filled(3, 4, 1.0f));
  const NodeId w = g.input(Tensor::filled(5, 4, 1.0f));
  const NodeId bad = g.input(Tensor::filled(1, 4, 1.0f));  // 4 columns, the product has 5
  g.linear(a, w, bad, true);
  EXPECT_THROW(SequentialExecutor().run(g), GraphError);
  Graph h;
  const NodeId d = h.input(Tensor::filled(3, 4, 1.0f));
  const NodeId v = h.input(Tensor::filled(4, 5, 1.0f));
  const NodeId of = h.input(Tensor::filled(3, 4, 1.0f));  // the product is 3 x 5
  h.matmul_relu_grad(d, v, of);
  EXPECT_THROW(SequentialExecutor().run(h), GraphError);
}

// A variable not bound to memory is an error naming it, not a read of address 0.
TEST(Graph, UnboundVariableIsAnErrorNamingIt) {
  Graph g;
  const NodeId v = g.variable(2, 2, nullptr, "batch");
  g.relu(v);
  try {
    SequentialExecutor().run(g);
    FAIL() << "ran an unbound variable";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("batch"), std::string::npos) << e.what();
  }
  const float data[4] = {-1, 2, -3, 4};
  g.bind(v, data);
  EXPECT_EQ(SequentialExecutor().run(g).back().data, (std::vector<float>{0, 2, 0, 4}));
  EXPECT_THROW(g.bind(1, data), GraphError);  // the relu is not a variable
}

}  // namespace
