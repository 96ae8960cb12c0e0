// The sharded update (DataParallelOptions::shard_update): each rank updates only the block the
// ring's reduce-scatter leaves summed on it, then the parameters (in 16 bits their working copy)
// are all-gathered. It must take the replicated update's steps bit for bit, in float32, bfloat16
// and FP16, at 2, 3 and 4 ranks, on a model whose parameter count is even and on one whose count
// is odd (the 16-bit ring's pair blocks then end in a half pair); between gathers the state
// outside a rank's block is stale (the control: it differs until gather_shards), and evaluate
// refuses stale master weights (save any stale state); an FP16 overflow found in one rank's block
// skips the step on every rank.
//   ch05_tests --gtest_filter='ShardedUpdate*'
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl::dp;
using concurdl::testing::within_seconds;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;

const nn::Dataset& data() {
  static const nn::Dataset d = nn::linear_problem(98, 32, 10, 4711);
  return d;
}

// 32-24-16-10 has 1362 parameters; 32-15-11, 671 (odd).
nn::TrainConfig config(nn::Precision p, std::size_t batch, bool odd) {
  nn::TrainConfig c;
  c.spec.widths =
      odd ? std::vector<std::size_t>{32, 15, 11} : std::vector<std::size_t>{32, 24, 16, 10};
  c.batch = batch;
  c.seed = 11;
  c.threads = 1;
  c.sgd.lr = 0.05f;
  c.precision = p;
  return c;
}

DataParallelOptions options(nn::Precision p, bool sharded) {
  DataParallelOptions o;
  if (p == nn::Precision::fp32) o.algorithm = "v4_ring";  // the ring whose halves shard
  o.shard_update = sharded;
  return o;
}

struct Outcome {
  std::vector<float> params, velocity;
  double loss = 0, divergence = -1;
  std::size_t skipped = 0;
  float scale = 0;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Outcome train(int ranks, const nn::TrainConfig& c, const DataParallelOptions& o, int epochs) {
  concurdl::kernels::set_compute_threads(1);
  Outcome out;
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      DataParallelTrainer t(comm, c, data(), o);
      double loss = 0;
      std::size_t skipped = 0;
      for (int e = 0; e < epochs; ++e) {
        const nn::EpochResult r = t.run_epoch();
        loss = r.loss;
        skipped += r.skipped_steps;
      }
      const double div = replica_divergence(comm, std::as_const(t).model().parameters());
      if (comm.rank() == 0) {
        const auto p = std::as_const(t).model().parameters();
        out.params.assign(p.begin(), p.end());
        out.velocity.assign(t.optimizer().velocity().begin(), t.optimizer().velocity().end());
        out.loss = loss;
        out.divergence = div;
        out.skipped = skipped;
        out.scale = t.loss_scaler().scale();
      }
    });
  });
  return out;
}

TEST(ShardedUpdate, TakesTheReplicatedStepsBitForBit) {
  for (const nn::Precision p : {nn::Precision::fp32, nn::Precision::bf16, nn::Precision::fp16})
    for (const bool odd : {false, true})
      for (const int ranks : {2, 3, 4}) {
        SCOPED_TRACE(std::string(nn::describe(p)) + " at " + std::to_string(ranks) + " ranks, " +
                     (odd ? "odd" : "even") + " parameter count");
        const nn::TrainConfig c = config(p, 20 / static_cast<std::size_t>(ranks), odd);
        const Outcome want = train(ranks, c, options(p, false), 2);
        const Outcome got = train(ranks, c, options(p, true), 2);
        EXPECT_EQ(got.divergence, 0.0);
        EXPECT_TRUE(same_bits(got.params, want.params)) << "parameters";
        EXPECT_TRUE(same_bits(got.velocity, want.velocity)) << "momentum";
        EXPECT_EQ(got.loss, want.loss);
      }
}

// Between gathers a rank's state outside its block is stale: rank 0's momentum after a few
// step()s differs from the replicated trainer's until gather_shards, evaluate refuses stale master
// weights and save any stale state.
TEST(ShardedUpdate, StateOutsideTheBlockIsStaleUntilGathered) {
  concurdl::kernels::set_compute_threads(1);
  for (const nn::Precision p : {nn::Precision::fp32, nn::Precision::bf16}) {
    SCOPED_TRACE(std::string(nn::describe(p)));
    const nn::TrainConfig c = config(p, 10, false);
    std::vector<float> want_v, want_p, stale_v, whole_v, whole_p;
    within_seconds(kDeadline, [&] {
      run_threads(2, [&](Communicator& comm) {
        DataParallelTrainer rep(comm, c, data(), options(p, false));
        DataParallelTrainer sh(comm, c, data(), options(p, true));
        for (int i = 0; i < 3; ++i) {
          rep.step();
          sh.step();
        }
        // Float32 gathers its parameters every step; 16 bits only their 16-bit copy.
        if (p == nn::Precision::fp32) {
          EXPECT_NO_THROW(sh.evaluate(data()));
        } else {
          EXPECT_THROW(sh.evaluate(data()), std::logic_error);
        }
        if (comm.rank() == 0) {
          EXPECT_THROW(sh.save(std::filesystem::temp_directory_path() / "never.ckpt"),
                       std::logic_error);
        }
        if (comm.rank() == 0) {
          stale_v.assign(sh.optimizer().velocity().begin(), sh.optimizer().velocity().end());
          want_v.assign(rep.optimizer().velocity().begin(), rep.optimizer().velocity().end());
          const auto wp = std::as_const(rep).model().parameters();
          want_p.assign(wp.begin(), wp.end());
        }
        sh.gather_shards();
        EXPECT_NO_THROW(sh.evaluate(data()));
        if (comm.rank() == 0) {
          whole_v.assign(sh.optimizer().velocity().begin(), sh.optimizer().velocity().end());
          const auto sp = std::as_const(sh).model().parameters();
          whole_p.assign(sp.begin(), sp.end());
        }
        const auto t = sh.times();
        EXPECT_GT(t.update_s, 0.0);
        EXPECT_GT(t.wait_s, 0.0);
      });
    });
    EXPECT_FALSE(same_bits(stale_v, want_v)) << "the momentum outside rank 0's block was current";
    EXPECT_TRUE(same_bits(whole_v, want_v));
    EXPECT_TRUE(same_bits(whole_p, want_p));
  }
}

TEST(ShardedUpdate, AnOverflowInOneBlockSkipsTheStepEverywhere) {
  nn::TrainConfig c = config(nn::Precision::fp16, 5, false);
  c.loss_scaler.initial = 0x1p60f;  // 4 ranks x 5 rows = 20 a step, 98 rows: 5 steps an epoch
  const Outcome want = train(4, c, options(nn::Precision::fp16, false), 1);
  const Outcome got = train(4, c, options(nn::Precision::fp16, true), 1);
  EXPECT_GT(want.skipped, 0u);
  EXPECT_EQ(got.skipped, want.skipped);
  EXPECT_EQ(got.scale, want.scale);
  EXPECT_EQ(got.divergence, 0.0);
  EXPECT_TRUE(same_bits(got.params, want.params));
}

TEST(ShardedUpdate, RefusesOverlapAndOtherAllReduces) {
  within_seconds(kDeadline, [] {
    run_threads(2, [](Communicator& comm) {
      DataParallelOptions overlap = options(nn::Precision::bf16, true);
      overlap.overlap = true;
      EXPECT_THROW(
          DataParallelTrainer(comm, config(nn::Precision::bf16, 5, false), data(), overlap),
          std::invalid_argument);
      DataParallelOptions native = options(nn::Precision::fp32, true);
      native.algorithm = "native";
      EXPECT_THROW(DataParallelTrainer(comm, config(nn::Precision::fp32, 5, false), data(), native),
                   std::invalid_argument);
      DataParallelTrainer t(comm, config(nn::Precision::fp32, 5, false), data(),
                            options(nn::Precision::fp32, true));
      EXPECT_NE(t.describe().find("update sharded"), std::string::npos) << t.describe();
    });
  });
}

}  // namespace
