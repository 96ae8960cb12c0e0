// Chapter 08's exercises through the checks their references pass. Each suite is typed over the
// chapter's own code and the student's, so both meet the same tests; while a stub still has
// CDL_TODO, its tests are skipped as "not attempted". Every test runs under a deadline
// (finishes_within: a hang fails the test, the others still run).
//   8.1 ParallelExecutor vs student_run_graph (exercises/student_executor.hpp), at 1, 2, 4 and
//       8 threads        ch08_tests --gtest_filter='ExecutorEx8_1/student.*'
//   8.2 apply_chain vs student_apply_chain (exercises/student_fused.hpp)
//                        ch08_tests --gtest_filter='FusedEx8_2/student.*'
// (what `concurdl exercise ch08` runs; '*Ex8*' runs the references' instances too).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../exercises/student_executor.hpp"
#include "../exercises/student_fused.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/fusion.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/df/mlp_graph.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/mlp.hpp"
#include "executor_checks.hpp"

namespace {

using namespace concurdl::df;
using concurdl::testing::finishes_within;

// Well under a second each here; sanitizer builds are about 10x slower.
constexpr int kDeadline = 60;
constexpr unsigned kThreadCounts[] = {1, 2, 4, 8};

// --- 8.1 the dependency-counting executor ------------------------------------------------------

struct ReferenceExecutor {
  static std::unique_ptr<Executor> make(unsigned threads) {
    return make_executor("parallel", static_cast<int>(threads));
  }
};
struct StudentExecutorType {
  static std::unique_ptr<Executor> make(unsigned threads) {
    return std::make_unique<StudentExecutor>(threads);
  }
};

// --- 8.2 the fused element-wise kernel ---------------------------------------------------------

struct ReferenceChain {
  static void apply(std::span<const std::pair<Op, float>> chain, const float* in, float* out,
                    std::size_t n) {
    apply_chain(chain, in, out, n);
  }
};
struct StudentChain {
  static void apply(std::span<const std::pair<Op, float>> chain, const float* in, float* out,
                    std::size_t n) {
    student_apply_chain(chain, in, out, n);
  }
};

// The instances are named "reference" and "student", so that `Suite/student.*` selects the
// student's tests alone.
struct ImplNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, StudentExecutorType> || std::is_same_v<T, StudentChain> ? "student"
                                                                                     : "reference";
  }
};

template <class T>
class ExecutorEx8_1 : public ::testing::Test {
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};
using Executors = ::testing::Types<ReferenceExecutor, StudentExecutorType>;
TYPED_TEST_SUITE(ExecutorEx8_1, Executors, ImplNames);

TYPED_TEST(ExecutorEx8_1, RandomGraphsGiveTheEagerValues) {
  for (const unsigned threads : kThreadCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [threads] {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      const auto exec = TypeParam::make(threads);
      concurdl::df::testing::random_graphs_give_the_eager_values(*exec);
    })));
}

TYPED_TEST(ExecutorEx8_1, EveryNodeRunsOnceAfterItsInputs) {
  for (const unsigned threads : kThreadCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [threads] {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      const auto exec = TypeParam::make(threads);
      concurdl::df::testing::every_node_runs_once_after_its_inputs(*exec);
    })));
}

TYPED_TEST(ExecutorEx8_1, AThrowingOpReachesTheCallerAndItsDependentsNeverRun) {
  for (const unsigned threads : kThreadCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [threads] {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      const auto exec = TypeParam::make(threads);
      concurdl::df::testing::a_throwing_op_reaches_the_caller(*exec);
    })));
}

TYPED_TEST(ExecutorEx8_1, ACycleIsRefusedNamingANodeOnIt) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    const auto exec = TypeParam::make(2);
    concurdl::df::testing::a_cycle_is_refused(*exec);
  })));
}

// The MLP's forward and backward as a graph: every gradient equals nn::Mlp's.
TYPED_TEST(ExecutorEx8_1, TheMlpGraphGivesNnsGradients) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    concurdl::nn::Mlp model(concurdl::nn::MlpSpec{{30, 24, 16, 10}}, 3,
                            concurdl::kernels::GemmVersion::v2_ikj);
    constexpr std::size_t rows = 12;
    std::vector<float> x(rows * 30);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.23f * static_cast<float>(i));
    std::vector<std::uint8_t> labels(rows);
    for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 10);
    model.forward_backward(x.data(), labels.data(), rows);
    const MlpGraph mg = record_mlp(model, x.data(), labels.data(), rows);
    const auto exec = TypeParam::make(2);
    const std::vector<Tensor>& v = exec->run(mg.graph);
    for (std::size_t l = 0; l < 3; ++l) {
      const auto want = model.layer_gradient(l);
      const Tensor& dw = v.at(mg.dw[l]);
      ASSERT_EQ(dw.size(), want.w.rows * want.w.cols) << "layer " << l;
      for (std::size_t i = 0; i < dw.size(); ++i)
        ASSERT_NEAR(dw.data[i], want.w.data[i], 1e-5f * (1.0f + std::fabs(want.w.data[i])))
            << "layer " << l << " dW " << i;
    }
  })));
}

template <class T>
class FusedEx8_2 : public ::testing::Test {};
using Chains = ::testing::Types<ReferenceChain, StudentChain>;
TYPED_TEST_SUITE(FusedEx8_2, Chains, ImplNames);

// The definition: each element through each op, one at a time, in float.
std::vector<float> one_op_at_a_time(const std::vector<std::pair<Op, float>>& chain,
                                    const std::vector<float>& x) {
  std::vector<float> y = x;
  for (float& v : y)
    for (const auto& [op, alpha] : chain) apply_op(op, alpha, &v, &v, 1);
  return y;
}

std::vector<std::pair<Op, float>> random_chain(std::mt19937& rng, std::size_t k) {
  static const Op ops[] = {Op::relu, Op::scale, Op::shift, Op::square};
  std::uniform_real_distribution<float> alpha(-1.5f, 1.5f);
  std::vector<std::pair<Op, float>> c;
  for (std::size_t i = 0; i < k; ++i) {
    const Op op = ops[rng() % 4];
    c.emplace_back(op, op == Op::scale || op == Op::shift ? alpha(rng) : 0.0f);
  }
  return c;
}

// Bit for bit what the ops give one at a time, for chains of 0 to 16 ops and lengths around
// every block and vector size a kernel might use (and none), out of place and in place.
TYPED_TEST(FusedEx8_2, EqualsTheOpsOneAtATime) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    std::mt19937 rng(82);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    for (const std::size_t n :
         {0ul, 1ul, 5ul, 15ul, 16ul, 17ul, 63ul, 64ul, 65ul, 1000ul, 8191ul, 8193ul, 100003ul}) {
      for (std::size_t k = 0; k <= 16; ++k) {
        SCOPED_TRACE(::testing::Message() << "n " << n << ", k " << k);
        const auto chain = random_chain(rng, k);
        std::vector<float> x(n);
        for (float& v : x) v = value(rng);
        const std::vector<float> want = one_op_at_a_time(chain, x);
        std::vector<float> out(n + 1, -123.0f);  // one past the end: must stay untouched
        TypeParam::apply(chain, x.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(want[i]))
              << "element " << i << " is " << out[i] << ", the ops one at a time give " << want[i];
        ASSERT_EQ(out[n], -123.0f) << "wrote past the end";
        std::vector<float> in_place = x;  // in == out
        TypeParam::apply(chain, in_place.data(), in_place.data(), n);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(in_place[i]),
                    std::bit_cast<std::uint32_t>(want[i]))
              << "in place: element " << i;
      }
    }
  })));
}

}  // namespace
