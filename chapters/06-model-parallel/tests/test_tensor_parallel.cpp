// Tensor parallelism (tensor_parallel.hpp): split over 1, 2, 3, 4 and 8 thread ranks, the
// column-parallel and row-parallel Linear layers and Megatron's MLP block compute what the
// unsplit nn::Mlp computes, forward and backward (output, input gradient, and each rank's slice
// of the weight and bias gradients), and the block communicates once each way.
//   ch06_tests --gtest_filter='TensorParallel*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "concurdl/nn/mlp.hpp"

namespace {

using namespace concurdl::mp;
using concurdl::testing::within_seconds;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;
constexpr std::size_t kBatch = 5;

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;  // [-1, 1)
  }
  return v;
}

// The unsplit model's forward and backward: output, input gradient, parameter gradients.
struct Reference {
  nn::Mlp mlp;
  std::vector<float> y, dx;
  Reference(std::vector<std::size_t> widths, const std::vector<float>& x,
            const std::vector<float>& dy)
      : mlp(nn::MlpSpec{widths}, 11, concurdl::kernels::GemmVersion::v2_ikj) {
    nn::Activations a;
    const std::size_t layers = widths.size() - 1;
    mlp.forward_layers(0, layers, x.data(), kBatch, a);
    y.assign(a.output(), a.output() + kBatch * widths.back());
    dx.resize(kBatch * widths.front());
    mlp.backward_layers(0, layers, a, dy.data(), dx.data());
  }
  std::span<const float> w(std::size_t l) {
    const nn::LayerView v = mlp.layer(l);
    return {v.w.data, v.w.rows * v.w.cols};
  }
  std::span<const float> b(std::size_t l) { return mlp.layer(l).b; }
  std::span<const float> dw(std::size_t l) {
    const nn::LayerView v = mlp.layer_gradient(l);
    return {v.w.data, v.w.rows * v.w.cols};
  }
  std::span<const float> db(std::size_t l) { return mlp.layer_gradient(l).b; }
};

void expect_near(std::span<const float> got, std::span<const float> want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << what << " [" << i << "]";
}

class TensorParallel : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};

TEST_P(TensorParallel, ColumnParallelLinearEqualsTheUnsplitLayer) {
  const int ranks = GetParam();
  constexpr std::size_t in = 7, out = 24;
  const std::vector<float> x = values(kBatch * in, 1), dy = values(kBatch * out, 2);
  Reference ref({in, out}, x, dy);
  within_seconds(kDeadline, [&] {
    dp::run_threads(ranks, [&](dp::Communicator& comm) {
      ColumnParallelLinear layer(
          comm, column_shard(ref.w(0), ref.b(0), in, out, comm.rank(), comm.size()),
          concurdl::kernels::GemmVersion::v2_ikj);
      std::vector<float> y(kBatch * out), dx(kBatch * in);
      layer.forward_gathered(x.data(), kBatch, y.data());
      expect_near(y, ref.y, "y");
      // Backward takes this rank's columns of dy.
      const std::size_t k = out / static_cast<std::size_t>(ranks);
      std::vector<float> dy_local(kBatch * k);
      for (std::size_t r = 0; r < kBatch; ++r)
        for (std::size_t c = 0; c < k; ++c)
          dy_local[r * k + c] = dy[r * out + static_cast<std::size_t>(comm.rank()) * k + c];
      layer.backward(x.data(), dy_local.data(), kBatch, dx.data());
      expect_near(dx, ref.dx, "dx");
      const LinearShard want = column_shard(ref.dw(0), ref.db(0), in, out, comm.rank(), ranks);
      expect_near(layer.shard().dw, want.w, "dw");
      expect_near(layer.shard().db, want.b, "db");
    });
  });
}

TEST_P(TensorParallel, RowParallelLinearEqualsTheUnsplitLayer) {
  const int ranks = GetParam();
  constexpr std::size_t in = 24, out = 5;
  const std::vector<float> x = values(kBatch * in, 3), dy = values(kBatch * out, 4);
  Reference ref({in, out}, x, dy);
  within_seconds(kDeadline, [&] {
    dp::run_threads(ranks, [&](dp::Communicator& comm) {
      RowParallelLinear layer(comm,
                              row_shard(ref.w(0), ref.b(0), in, out, comm.rank(), comm.size()),
                              concurdl::kernels::GemmVersion::v2_ikj);
      const std::size_t k = in / static_cast<std::size_t>(ranks);
      const std::size_t first = k * static_cast<std::size_t>(comm.rank());
      std::vector<float> x_local(kBatch * k), dx_local(kBatch * k), y(kBatch * out);
      for (std::size_t r = 0; r < kBatch; ++r)
        for (std::size_t c = 0; c < k; ++c) x_local[r * k + c] = x[r * in + first + c];
      layer.forward(x_local.data(), kBatch, y.data());
      expect_near(y, ref.y, "y");
      layer.backward(x_local.data(), dy.data(), kBatch, dx_local.data());
      for (std::size_t r = 0; r < kBatch; ++r)
        for (std::size_t c = 0; c < k; ++c)
          ASSERT_NEAR(dx_local[r * k + c], ref.dx[r * in + first + c], 1e-5f) << r << "," << c;
      const LinearShard want = row_shard(ref.dw(0), ref.db(0), in, out, comm.rank(), ranks);
      expect_near(layer.shard().dw, want.w, "dw");
      expect_near(layer.shard().db, want.b, "db");
    });
  });
}

// Megatron's block: the unsplit 2-layer MLP's output, input gradient and every parameter
// gradient, with one all-reduce forward and one backward.
TEST_P(TensorParallel, MlpBlockEqualsTheUnsplitMlpWithOneAllReduceEachWay) {
  const int ranks = GetParam();
  constexpr std::size_t in = 9, hidden = 24, out = 6;
  const std::vector<float> x = values(kBatch * in, 5), dy = values(kBatch * out, 6);
  Reference ref({in, hidden, out}, x, dy);
  within_seconds(kDeadline, [&] {
    dp::run_threads(ranks, [&](dp::Communicator& comm) {
      ParallelMlpBlock block(comm, ref.w(0), ref.b(0), ref.w(1), ref.b(1), in, hidden, out,
                             concurdl::kernels::GemmVersion::v2_ikj);
      std::vector<float> y(kBatch * out), dx(kBatch * in);
      block.forward(x.data(), kBatch, y.data());
      expect_near(y, ref.y, "y");
      block.backward(dy.data(), kBatch, dx.data());
      expect_near(dx, ref.dx, "dx");
      EXPECT_EQ(block.all_reduces(), 2u);
      const int r = comm.rank();
      expect_near(block.first().shard().dw,
                  column_shard(ref.dw(0), ref.db(0), in, hidden, r, ranks).w, "dw1");
      expect_near(block.first().shard().db,
                  column_shard(ref.dw(0), ref.db(0), in, hidden, r, ranks).b, "db1");
      expect_near(block.second().shard().dw,
                  row_shard(ref.dw(1), ref.db(1), hidden, out, r, ranks).w, "dw2");
      expect_near(block.second().shard().db, ref.db(1), "db2");
    });
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallel, ::testing::Values(1, 2, 3, 4, 8));

TEST(TensorParallelShapes, FeaturesThatDoNotDivideAreRefusedByName) {
  const std::vector<float> w(10 * 3), b(10);
  try {
    column_shard(w, b, 3, 10, 0, 4);
    FAIL() << "10 outputs over 4 ranks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("10 output features do not divide over 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(row_shard(w, b, 3, 10, 0, 2), std::invalid_argument);     // 3 inputs over 2
  EXPECT_THROW(column_shard(w, b, 4, 10, 0, 2), std::invalid_argument);  // wrong weight count
}

}  // namespace
