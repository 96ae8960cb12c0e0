// Expert-parallel training (expert_trainer.hpp) against nn::MoeMlp and nn::MoeTrainer: one
// step's gradients at 1, 2, 3, 4 and 8 thread ranks (one group) equal nn::MoeMlp's on the whole
// global batch, top-1 and top-2 with capacity factor 1 (drops happen, and the test checks they
// do); with 2 groups of 2 they are the mean of nn::MoeMlp's on each group's half. An epoch at
// 2 ranks ends where nn::MoeTrainer with twice the batch ends; the gathered model and its
// checkpoint are the trained one, and a checkpoint resumes at another rank count.
//   ch06_tests --gtest_filter='ExpertTrainer*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/expert_trainer.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/moe_trainer.hpp"

namespace {

using namespace concurdl::mp;
using concurdl::testing::within_seconds;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;
namespace fs = std::filesystem;

constexpr int kDeadline = 120;
// Gradients summed over ranks (and each rank's rows first) instead of in one GEMM: a few float
// roundings apart, relative to 1 + |value|.
constexpr float kTol = 1e-6f;

float worst(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size()) return 1e9f;
  float w = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    w = std::max(w, std::fabs(got[i] - want[i]) / (1.0f + std::fabs(want[i])));
  return w;
}

nn::TrainConfig config_of(std::size_t batch) {
  nn::TrainConfig c;
  c.spec = nn::MlpSpec{{24, 16, 12, 5}};
  c.batch = batch;
  c.seed = 7;
  c.gemm = concurdl::kernels::GemmVersion::v2_ikj;  // rows independent of each other
  c.sgd.lr = 0.05f;
  c.sgd.momentum = 0.9f;
  c.threads = 0;
  return c;
}

nn::MoeBlock block_of(std::size_t top_k) {
  nn::MoeBlock b;
  b.experts = 8;
  b.hidden = 10;
  b.top_k = top_k;
  b.capacity_factor = 1.0;
  b.aux_alpha = 0.05f;
  return b;
}

struct Case {
  int ranks, data;
  std::size_t top_k;
};

class ExpertTrainerStep : public ::testing::TestWithParam<Case> {};

// Each rank's block of a global batch of ranks x 6 rows, gradients against MoeMlp's on each
// group's rows (the mean over groups).
TEST_P(ExpertTrainerStep, GradientsAreTheSingleProcessModels) {
  const Case c = GetParam();
  const std::size_t per_rank = 6, global = per_rank * static_cast<std::size_t>(c.ranks);
  const nn::Dataset data = nn::linear_problem(global, 24, 5, 11);
  const nn::TrainConfig config = config_of(per_rank);
  const nn::MoeBlock block = block_of(c.top_k);
  const int P = c.ranks / c.data;

  // The single-process model, once per group, gradients averaged over the groups.
  nn::MoeMlp whole(config.spec, block, config.seed, config.gemm);
  std::vector<float> want_mlp(whole.mlp().gradients().size(), 0.0f);
  std::vector<float> want_moe(whole.moe().gradients().size(), 0.0f);
  std::size_t dropped = 0;
  for (int g = 0; g < c.data; ++g) {
    const std::size_t first = static_cast<std::size_t>(g * P) * per_rank;
    (void)whole.forward_backward(data.row(first), data.y.data() + first,
                                 per_rank * static_cast<std::size_t>(P));
    dropped += whole.moe().stats().dropped;
    for (std::size_t i = 0; i < want_mlp.size(); ++i)
      want_mlp[i] += whole.mlp().gradients()[i] / static_cast<float>(c.data);
    for (std::size_t i = 0; i < want_moe.size(); ++i)
      want_moe[i] += whole.moe().gradients()[i] / static_cast<float>(c.data);
  }
  EXPECT_GT(dropped, 0u) << "capacity factor 1 should drop choices here";

  std::vector<float> worst_mlp(static_cast<std::size_t>(c.ranks), 1e9f), worst_router(worst_mlp),
      worst_experts(worst_mlp);
  concurdl::kernels::ComputeThreadsScope one(1);
  within_seconds(kDeadline, [&] {
    dp::run_threads(c.ranks, [&](dp::Communicator& world) {
      ExpertParallelTrainer t(world, config, block, data, {.data = c.data});
      const dp::Block b = dp::block_of(global, world.size(), world.rank());
      (void)t.forward_backward(data.row(b.offset), data.y.data() + b.offset, b.count, global);
      const auto r = static_cast<std::size_t>(world.rank());
      worst_mlp[r] = worst(t.mlp().gradients(), want_mlp);
      const std::size_t router = t.moe().router_gradients().size();
      worst_router[r] =
          worst(t.moe().router_gradients(), std::span<const float>(want_moe).first(router));
      float e_worst = 0;
      for (std::size_t e = t.moe().first_expert();
           e < t.moe().first_expert() + t.moe().local_experts(); ++e) {
        const std::size_t at = whole.moe().parameter_offsets()[1 + e];
        const std::span<float> g = t.moe().expert_gradients(e);
        e_worst =
            std::max(e_worst, worst(g, std::span<const float>(want_moe).subspan(at, g.size())));
      }
      worst_experts[r] = e_worst;
    });
  });
  for (int r = 0; r < c.ranks; ++r) {
    EXPECT_LE(worst_mlp[static_cast<std::size_t>(r)], kTol) << "MLP, rank " << r;
    EXPECT_LE(worst_router[static_cast<std::size_t>(r)], kTol) << "router, rank " << r;
    EXPECT_LE(worst_experts[static_cast<std::size_t>(r)], kTol) << "experts, rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Grids, ExpertTrainerStep,
                         ::testing::Values(Case{1, 1, 1}, Case{2, 1, 1}, Case{3, 1, 2},
                                           Case{4, 1, 1}, Case{4, 1, 2}, Case{8, 1, 2},
                                           Case{4, 2, 1}, Case{4, 2, 2}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return "r" + std::to_string(i.param.ranks) + "d" +
                                  std::to_string(i.param.data) + "top" +
                                  std::to_string(i.param.top_k);
                         });

// Two epochs at 2 ranks of batch 16 against nn::MoeTrainer with batch 32; the gathered model's
// checkpoint is nn::MoeTrainer's format and resumes at 4 ranks to the same parameters.
TEST(ExpertTrainer, EpochsEndWhereOneProcessEnds) {
  const nn::Dataset data = nn::linear_problem(200, 24, 5, 3);
  const nn::MoeBlock block = block_of(2);
  nn::TrainConfig single = config_of(32);
  nn::MoeTrainer one(single, block, data);
  concurdl::kernels::ComputeThreadsScope one_thread(1);
  for (int e = 0; e < 2; ++e) (void)one.run_epoch();
  std::vector<float> want(one.model().mlp().parameters().begin(),
                          one.model().mlp().parameters().end());
  want.insert(want.end(), one.model().moe().parameters().begin(),
              one.model().moe().parameters().end());

  const fs::path ckpt = fs::temp_directory_path() / "concurdl_expert_trainer_test.ckpt";
  float got_worst = 1e9f, resumed_worst = 1e9f;
  double accuracy_gap = 1;
  within_seconds(kDeadline, [&] {
    dp::run_threads(2, [&](dp::Communicator& world) {
      ExpertParallelTrainer t(world, config_of(16), block, data);
      for (int e = 0; e < 2; ++e) (void)t.run_epoch({}, 50);
      if (world.rank() == 0) {
        std::vector<float> got(t.model().mlp().parameters().begin(),
                               t.model().mlp().parameters().end());
        got.insert(got.end(), t.model().moe().parameters().begin(),
                   t.model().moe().parameters().end());
        got_worst = worst(got, want);
        accuracy_gap = std::fabs(t.evaluate(data).accuracy - one.evaluate(data).accuracy);
        t.save(ckpt);
      }
      world.barrier();
    });
    dp::run_threads(4, [&](dp::Communicator& world) {
      ExpertParallelTrainer t(world, config_of(8), block, data);
      t.resume(ckpt);
      t.gather_model();
      if (world.rank() == 0) {
        nn::MoeMlp loaded(single.spec, block, 0, single.gemm);
        nn::Sgd a(loaded.mlp().parameters().size(), single.sgd);
        nn::Sgd b(loaded.moe().parameters().size(), single.sgd);
        const nn::TrainState s = nn::load_moe_checkpoint(ckpt, loaded, a, b);
        EXPECT_EQ(s.epoch, 2u);
        EXPECT_EQ(t.state().epoch, 2u);
        resumed_worst = std::max(worst(t.model().mlp().parameters(), loaded.mlp().parameters()),
                                 worst(t.model().moe().parameters(), loaded.moe().parameters()));
      }
    });
  });
  fs::remove(ckpt);
  // Fourteen SGD steps with momentum carry the summation-order differences (4e-8 here) forward.
  EXPECT_LE(got_worst, 1e-5f);
  EXPECT_LE(accuracy_gap, 0.02);
  EXPECT_EQ(resumed_worst, 0.0f);
}

TEST(ExpertTrainer, RefusesWhatItCannotRun) {
  const nn::Dataset data = nn::linear_problem(40, 24, 5, 3);
  within_seconds(kDeadline, [&] {
    dp::run_threads(4, [&](dp::Communicator& world) {
      EXPECT_THROW(ExpertParallelTrainer(world, config_of(4), block_of(1), data, {.data = 3}),
                   std::invalid_argument);
      nn::MoeBlock few = block_of(1);
      few.experts = 2;
      EXPECT_THROW(ExpertParallelTrainer(world, config_of(4), few, data), std::invalid_argument);
      // Two groups of two: 2 experts are enough.
      EXPECT_NO_THROW(ExpertParallelTrainer(world, config_of(4), few, data, {.data = 2}));
    });
  });
}

}  // namespace
