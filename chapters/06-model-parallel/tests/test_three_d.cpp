// 3D parallelism (three_d.hpp): a tensor-parallel stage at 1, 2 and 4 ranks gives the unsplit
// layers' gradients and input gradient; and one step on every grid of 8 thread ranks (2x2x2
// among them) and of 1, 2 and 4, under GPipe and 1F1B with uneven micro-batches, gives every
// rank the gradients one process computes on the whole batch, and every rank the batch's loss.
//   ch06_tests --gtest_filter='ThreeD*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/three_d.hpp"
#include "concurdl/mp/three_d_trainer.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/trainer.hpp"

namespace {

using namespace concurdl::mp;
using concurdl::testing::within_seconds;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;
constexpr std::size_t kRows = 26;  // over 2 data ranks, 13 each: uneven micro-batches
// 6 layers; every pair's hidden width (8, 12, 8) divides by 2 and 4 tensor ranks.
const nn::MlpSpec kSpec{{6, 8, 12, 8, 12, 8, 5}};

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

struct Batch {
  std::vector<float> x = values(kRows * kSpec.widths.front(), 3);
  std::vector<std::uint8_t> labels = [] {
    std::vector<std::uint8_t> y(kRows);
    for (std::size_t i = 0; i < kRows; ++i) y[i] = static_cast<std::uint8_t>((i * 7) % 5);
    return y;
  }();
};

void expect_near(std::span<const float> got, std::span<const float> want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i]))) << what << ": element " << i;
}

// One stage over the whole model, 1, 2, 4 tensor ranks: the forward's output, the gradients
// scattered back into the model's layout and the input's gradient are the unsplit model's.
TEST(ThreeDTensorStage, EqualsTheUnsplitLayers) {
  concurdl::kernels::set_compute_threads(1);
  const Batch b;
  nn::Mlp whole(kSpec, 9, concurdl::kernels::GemmVersion::v2_ikj);
  std::vector<float> dx_want(kRows * kSpec.widths.front());
  whole.forward_backward(b.x.data(), b.labels.data(), kRows, nullptr, dx_want.data());
  std::vector<float> logits_want(kRows * kSpec.widths.back());
  whole.forward(b.x.data(), kRows, logits_want.data());
  const std::size_t L = whole.layers();
  for (const int T : {1, 2, 4}) {
    SCOPED_TRACE("tensor ranks " + std::to_string(T));
    std::vector<std::vector<float>> grads(static_cast<std::size_t>(T),
                                          std::vector<float>(whole.parameters().size(), 0.0f));
    std::vector<std::vector<float>> dx(static_cast<std::size_t>(T));
    within_seconds(kDeadline, [&] {
      dp::run_threads(T, [&](dp::Communicator& comm) {
        nn::Mlp init(kSpec, 9);
        TensorParallelStage stage(comm, kSpec, init.parameters(), 0, L,
                                  concurdl::kernels::GemmVersion::v2_ikj);
        EXPECT_EQ(stage.split(0), T > 1 ? TensorParallelStage::Split::column
                                        : TensorParallelStage::Split::replicated);
        TensorParallelStage::Activations a;
        stage.forward_layers(0, L, b.x.data(), kRows, a);
        std::vector<float> dl(kRows * kSpec.widths.back());
        nn::softmax_xent_loss(a.output(), b.labels.data(), kRows, kSpec.widths.back(), dl.data());
        auto& mine = dx[static_cast<std::size_t>(comm.rank())];
        mine.resize(kRows * kSpec.widths.front());
        stage.backward_layers(0, L, a, dl.data(), mine.data());
        stage.scatter_gradients(grads[static_cast<std::size_t>(comm.rank())]);
      });
    });
    for (int t = 0; t < T; ++t) expect_near(dx[static_cast<std::size_t>(t)], dx_want, "dx");
    // Every element is some rank's: put the shards together.
    std::vector<float> all(whole.parameters().size(), 0.0f);
    for (int t = 0; t < T; ++t)
      for (std::size_t i = 0; i < all.size(); ++i)
        if (grads[static_cast<std::size_t>(t)][i] != 0.0f)
          all[i] = grads[static_cast<std::size_t>(t)][i];
    expect_near(all, whole.gradients(), "gradients");
  }
}

class ThreeDStep : public ::testing::TestWithParam<Grid> {
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};

// Every rank's gradients and loss after one step equal one process's whole-batch step.
TEST_P(ThreeDStep, EveryRankGetsTheWholeBatchsGradients) {
  const Grid g = GetParam();
  const Batch b;
  nn::Mlp whole(kSpec, 9, concurdl::kernels::GemmVersion::v2_ikj);
  const float loss = whole.forward_backward(b.x.data(), b.labels.data(), kRows);
  for (const Schedule schedule : {Schedule::gpipe, Schedule::one_f_one_b})
    for (const std::size_t m : {1, 3}) {
      SCOPED_TRACE(g.describe() + " " + std::string(schedule_name(schedule)) +
                   " m=" + std::to_string(m));
      std::vector<std::vector<float>> grads(static_cast<std::size_t>(g.size()));
      std::vector<double> losses(static_cast<std::size_t>(g.size()));
      within_seconds(kDeadline, [&] {
        dp::run_threads(g.size(), [&](dp::Communicator& world) {
          GridGroups groups = split_grid(world, g);
          nn::Mlp init(kSpec, 9);
          ThreeDRank rank = make_three_d_rank(groups, g, kSpec, init.parameters(),
                                              concurdl::kernels::GemmVersion::v2_ikj);
          const GridPosition at = grid_position(g, world.rank());
          EXPECT_EQ(rank.at.data, at.data);
          EXPECT_EQ(rank.at.tensor, at.tensor);
          EXPECT_EQ(rank.at.pipeline, at.pipeline);
          ThreeDStepResult r;
          for (int step = 0; step < 2; ++step)  // the workspace reused
            r = three_d_step(groups, rank, b.x.data(), b.labels.data(), kRows, m, schedule);
          auto& mine = grads[static_cast<std::size_t>(world.rank())];
          mine.assign(whole.parameters().size(), std::nanf(""));
          rank.stage->scatter_gradients(mine);
          losses[static_cast<std::size_t>(world.rank())] = r.loss_sum;
        });
      });
      const auto want = whole.gradients();
      std::vector<int> covered(want.size(), 0);
      for (int r = 0; r < g.size(); ++r) {
        const auto& mine = grads[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < want.size(); ++i) {
          if (std::isnan(mine[i])) continue;
          ++covered[i];
          ASSERT_NEAR(mine[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
              << "rank " << r << " gradient " << i;
        }
        EXPECT_NEAR(losses[static_cast<std::size_t>(r)] / kRows, loss, 1e-5)
            << "rank " << r << "'s loss";
      }
      for (std::size_t i = 0; i < want.size(); ++i)
        ASSERT_GE(covered[i], g.data) << "gradient " << i << " held by no rank of some replica";
    }
}

INSTANTIATE_TEST_SUITE_P(Grids, ThreeDStep,
                         ::testing::Values(Grid{1, 1, 1}, Grid{2, 1, 1}, Grid{1, 2, 1},
                                           Grid{1, 1, 2}, Grid{2, 2, 1}, Grid{2, 1, 2},
                                           Grid{1, 2, 2}, Grid{2, 2, 2}, Grid{1, 4, 2},
                                           Grid{4, 1, 2}, Grid{2, 1, 4}),
                         [](const auto& info) {
                           const Grid& g = info.param;
                           return "d" + std::to_string(g.data) + "t" + std::to_string(g.tensor) +
                                  "p" + std::to_string(g.pipeline);
                         });

TEST(ThreeDGrid, PositionsAndRefusals) {
  const Grid g{2, 2, 2};
  EXPECT_EQ(grid_position(g, 5).tensor, 1);
  EXPECT_EQ(grid_position(g, 5).data, 0);
  EXPECT_EQ(grid_position(g, 5).pipeline, 1);
  EXPECT_EQ(grid_position(g, 6).data, 1);
  EXPECT_THROW(dp::run_threads(4,
                               [](dp::Communicator& w) {
                                 (void)split_grid(w, Grid{2, 2, 2});
                               }),
               std::invalid_argument);
  // A pair's hidden width (8) does not divide over 3 tensor ranks.
  EXPECT_THROW(dp::run_threads(3,
                               [](dp::Communicator& w) {
                                 nn::Mlp init(kSpec, 9);
                                 TensorParallelStage s(w, kSpec, init.parameters(), 0, 6);
                               }),
               std::invalid_argument);
}

}  // namespace

namespace {

// 3D training: two epochs on a 2x2x2 grid (and 1x2x1, 2x1x2) end where one process ends, batches
// of 10 over 57 rows (a short last batch of 7: data shards of 4 and 3), and a checkpoint taken
// after one epoch resumes into a trainer that ends there too.
TEST(ThreeDTrain, EndsWhereOneProcessEndsAndResumes) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset data = nn::linear_problem(57, 6, 5, 11);
  nn::TrainConfig c;
  c.spec = kSpec;
  c.batch = 10;
  c.seed = 3;
  c.threads = 1;
  c.gemm = concurdl::kernels::GemmVersion::v2_ikj;
  nn::Trainer one(c, data);
  one.run_epoch();
  one.run_epoch();
  const auto want = one.model().parameters();
  for (const Grid g : {Grid{2, 2, 2}, Grid{1, 2, 1}, Grid{2, 1, 2}})
    within_seconds(kDeadline, [&] {
      SCOPED_TRACE(g.describe());
      ThreeDTrainer t(
          c, data,
          {.grid = g, .batching = {.micro_batches = 3, .schedule = Schedule::one_f_one_b}});
      for (int e = 0; e < 2; ++e) t.run_epoch({}, 0);
      expect_near(t.parameters(), want, "parameters");
      EXPECT_EQ(t.state().step, one.state().step);
      EXPECT_NEAR(t.evaluate(data).loss, one.evaluate(data).loss, 1e-4);
    });
  const auto ck = std::filesystem::temp_directory_path() / "concurdl_three_d_ck.bin";
  within_seconds(kDeadline, [&] {
    ThreeDTrainer first(
        c, data,
        {.grid = Grid{2, 2, 2}, .batching = {.micro_batches = 3, .schedule = Schedule::gpipe}});
    first.run_epoch({}, 0);
    first.save(ck);
    ThreeDTrainer second(
        c, data,
        {.grid = Grid{2, 2, 2}, .batching = {.micro_batches = 3, .schedule = Schedule::gpipe}});
    second.resume(ck);
    second.run_epoch({}, 0);
    expect_near(second.parameters(), want, "resumed");
  });
  std::filesystem::remove(ck);
  EXPECT_THROW(ThreeDTrainer(c, data,
                             {.grid = Grid{1, 3, 1},
                              .batching = {.micro_batches = 3, .schedule = Schedule::gpipe}}),
               std::invalid_argument);
  EXPECT_THROW(ThreeDTrainer(c, data,
                             {.grid = Grid{1, 1, 7},
                              .batching = {.micro_batches = 3, .schedule = Schedule::gpipe}}),
               std::invalid_argument);
  EXPECT_THROW(ThreeDTrainer(c, data,
                             {.grid = Grid{1, 1, 2},
                              .batching = {.micro_batches = 3, .schedule = Schedule::zb_h1}}),
               std::invalid_argument);
}

}  // namespace
