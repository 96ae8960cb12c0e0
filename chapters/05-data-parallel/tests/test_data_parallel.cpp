// Data-parallel SGD on the threads backend (data_parallel.hpp): bucket plans; N ranks with
// per-rank batch b end at the parameters one nn::Trainer with batch N·b reaches (float
// tolerance), for 1..4 ranks, blocking and overlapped, every bucket size, every all-reduce of
// the table, and the student's sync of exercise 5.2 through the same checks; the replicas stay
// identical; checkpoints resume on every rank; a rank that throws fails the others in seconds.
//   ch05_tests --gtest_filter='Ddp*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../exercises/student_bucket.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl::dp;
using concurdl::testing::within_seconds;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;

// A small learnable problem: 98 samples of 32 features, the label the argmax of a fixed linear
// map. 98 does not divide by any global batch below, so the epoch's last batch is short (and
// at 4 ranks x 6 some ranks get no rows of it).
const nn::Dataset& data() {
  static const nn::Dataset d = nn::linear_problem(98, 32, 10, 12345);
  return d;
}

nn::TrainConfig config(std::size_t batch) {
  nn::TrainConfig c;
  c.spec.widths = {32, 24, 16, 10};  // layers of 792, 400 and 170 floats
  c.batch = batch;
  c.seed = 7;
  c.threads = 0;
  c.sgd.lr = 0.05f;
  return c;
}

struct Final {
  std::vector<float> params, velocity;
  std::uint64_t step = 0;
  double loss = 0;  // the last epoch's mean
};

Final single_rank(std::size_t batch, int epochs) {
  concurdl::kernels::set_compute_threads(1);
  nn::Trainer t(config(batch), data());
  Final f;
  for (int e = 0; e < epochs; ++e) f.loss = t.run_epoch().loss;
  f.params.assign(t.model().parameters().begin(), t.model().parameters().end());
  f.velocity.assign(t.optimizer().velocity().begin(), t.optimizer().velocity().end());
  f.step = t.state().step;
  return f;
}

float max_diff(const std::vector<float>& a, std::span<const float> b) {
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

struct Outcome {
  float param_diff = 0, velocity_diff = 0;
  double divergence = 0, loss = 0;
  std::uint64_t step = 0;
};

// N ranks with per-rank batch b for `epochs` epochs, against rank 0's final state.
Outcome data_parallel(int ranks, std::size_t b, int epochs, const DataParallelOptions& opt,
                      const Final& want) {
  concurdl::kernels::set_compute_threads(1);
  Outcome out;
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      DataParallelTrainer t(comm, config(b), data(), opt);
      double loss = 0;
      for (int e = 0; e < epochs; ++e) loss = t.run_epoch().loss;
      const double div = replica_divergence(comm, t.model().parameters());
      if (comm.rank() == 0) {
        out.param_diff = max_diff(want.params, t.model().parameters());
        out.velocity_diff = max_diff(want.velocity, t.optimizer().velocity());
        out.divergence = div;
        out.loss = loss;
        out.step = t.state().step;
      }
    });
  });
  return out;
}

float g_worst_param_diff = 0;  // over the configurations of a test, printed at its end

void expect_same_as_one_rank(const Outcome& o, const Final& want) {
  g_worst_param_diff = std::max(g_worst_param_diff, o.param_diff);
  EXPECT_EQ(o.step, want.step);
  EXPECT_LE(o.param_diff, 2e-5f) << "parameters differ from one rank with the global batch";
  EXPECT_LE(o.velocity_diff, 2e-5f);
  EXPECT_EQ(o.divergence, 0.0) << "the replicas are not identical";
  EXPECT_NEAR(o.loss, want.loss, 1e-4 * std::max(1.0, want.loss));
}

// --- bucket plans ----------------------------------------------------------------------------

TEST(DdpBuckets, PlanFromTheLastLayerDown) {
  const std::vector<std::size_t> off = {0, 792, 1192, 1362};  // 3168, 1600, 680 bytes
  EXPECT_EQ(plan_buckets(off, 0),
            (std::vector<GradBucket>{{2, 3, 1192, 170}, {1, 2, 792, 400}, {0, 1, 0, 792}}));
  EXPECT_EQ(plan_buckets(off, 2048), (std::vector<GradBucket>{{1, 3, 792, 570}, {0, 1, 0, 792}}));
  EXPECT_EQ(plan_buckets(off, 1 << 20), (std::vector<GradBucket>{{0, 3, 0, 1362}}));
  // The default on the real MLP (784-256-128-10): {layers 2, 1} and {layer 0}.
  nn::Mlp m(nn::MlpSpec{}, 1);
  const auto plan = plan_buckets(m.layer_offsets(), kDefaultBucketBytes);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].first_layer, 1u);
  EXPECT_EQ(plan[1].count, 784u * 256 + 256);
  EXPECT_THROW(plan_buckets(std::vector<std::size_t>{0}, 0), std::invalid_argument);
}

TEST(DdpBuckets, UnknownAllReduceIsAUsageError) {
  EXPECT_THROW(find_allreduce("v9_magic"), concurdl::UsageError);
  EXPECT_NE(find_allreduce("v4_ring"), nullptr);
}

// --- N ranks x b = one rank x N·b --------------------------------------------------------------

struct SyncKind {
  const char* name;
  bool overlap;
  SyncFactory make;  // empty: the trainer's own (by `overlap`)
};

SyncFactory student_sync() {
  return [](Communicator& c, std::span<float> g, std::vector<std::size_t> off, std::size_t bytes,
            AllReduceFn f, AlgoOptions o) -> std::unique_ptr<GradientSync> {
    return std::make_unique<StudentBucketSync>(c, g, std::move(off), bytes, f, o);
  };
}

class DdpEquivalence : public ::testing::TestWithParam<SyncKind> {};

TEST_P(DdpEquivalence, NRanksEqualOneRankWithTheGlobalBatch) {
  const SyncKind kind = GetParam();
  constexpr std::size_t b = 6;
  g_worst_param_diff = 0;
  for (int ranks : {1, 2, 3, 4}) {
    const Final want = single_rank(b * static_cast<std::size_t>(ranks), 2);
    for (std::size_t bucket : {std::size_t{0}, std::size_t{2048}, std::size_t{1} << 20}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, bucket " + std::to_string(bucket) + " bytes");
      DataParallelOptions opt;
      opt.bucket_bytes = bucket;
      opt.overlap = kind.overlap;
      opt.make_sync = kind.make;
      CDL_TRY_EXERCISE(expect_same_as_one_rank(data_parallel(ranks, b, 2, opt, want), want));
    }
  }
  std::printf("largest |parameter difference| from one rank with batch N x %zu: %g\n", b,
              static_cast<double>(g_worst_param_diff));
}

TEST_P(DdpEquivalence, EveryAllReduceOfTheTable) {
  const SyncKind kind = GetParam();
  const Final want = single_rank(3 * 5, 2);
  for (const AllReduceVariant& row : kAllReduceVariants) {
    SCOPED_TRACE(std::string(row.name));
    DataParallelOptions opt;
    opt.bucket_bytes = 0;
    opt.overlap = kind.overlap;
    opt.make_sync = kind.make;
    opt.algorithm = std::string(row.name);
    CDL_TRY_EXERCISE(expect_same_as_one_rank(data_parallel(3, 5, 2, opt, want), want));
  }
}

// A rank that throws in the middle of an epoch: the others fail within seconds, never hang,
// and the first rank's own exception is the one reported.
TEST_P(DdpEquivalence, ARankThatThrowsFailsTheOthers) {
  const SyncKind kind = GetParam();
  for (int ranks : {2, 4}) {
    DataParallelOptions opt;
    opt.bucket_bytes = 0;
    opt.overlap = kind.overlap;
    opt.make_sync = kind.make;
    std::string what;
    CDL_TRY_EXERCISE(within_seconds(kDeadline, [&] {
      try {
        run_threads(ranks, [&](Communicator& comm) {
          DataParallelTrainer t(comm, config(4), data(), opt);
          for (int s = 0; s < 20; ++s) {
            if (comm.rank() == ranks - 1 && s == 3) throw std::runtime_error("boom at step 3");
            t.step();
          }
        });
      } catch (const concurdl::NotImplemented&) {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      }
    }));
    EXPECT_EQ(what, "boom at step 3");
  }
}

INSTANTIATE_TEST_SUITE_P(DdpReference, DdpEquivalence,
                         ::testing::Values(SyncKind{"blocking", false, {}},
                                           SyncKind{"overlap", true, {}}),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(DdpEx5_2, DdpEquivalence,
                         ::testing::Values(SyncKind{"student", true, student_sync()}),
                         [](const auto& info) { return std::string(info.param.name); });

// --- checkpoints -------------------------------------------------------------------------------

// Rank 0 writes after epoch 1; new trainers on every rank resume from it and train epoch 2:
// the same parameters, bit for bit, as two epochs without a break.
TEST(DdpCheckpoint, EveryRankResumesFromRankZerosCheckpoint) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("concurdl-ddp-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
       std::to_string(reinterpret_cast<std::uintptr_t>(&file)) + ".ckpt");
  DataParallelOptions opt;
  opt.overlap = true;
  opt.bucket_bytes = 0;
  concurdl::kernels::set_compute_threads(1);
  std::vector<float> straight, resumed;
  within_seconds(kDeadline, [&] {
    run_threads(3, [&](Communicator& comm) {
      DataParallelTrainer t(comm, config(5), data(), opt);
      t.run_epoch();
      if (comm.rank() == 0) t.save(file);
      t.run_epoch();
      if (comm.rank() == 0)
        straight.assign(t.model().parameters().begin(), t.model().parameters().end());
    });
    run_threads(3, [&](Communicator& comm) {
      DataParallelTrainer t(comm, config(5), data(), opt);
      t.resume(file);
      EXPECT_EQ(t.state().epoch, 1u);
      t.run_epoch();
      EXPECT_EQ(replica_divergence(comm, t.model().parameters()), 0.0);
      if (comm.rank() == 0)
        resumed.assign(t.model().parameters().begin(), t.model().parameters().end());
    });
  });
  std::filesystem::remove(file);
  ASSERT_FALSE(straight.empty());
  EXPECT_EQ(resumed, straight);
}

// The step-time breakdown adds up, and the all-reduce's busy time is counted.
TEST(DdpTimes, BreakdownIsConsistent) {
  concurdl::kernels::set_compute_threads(1);
  for (bool overlap : {false, true}) {
    DataParallelOptions opt;
    opt.overlap = overlap;
    opt.bucket_bytes = 0;
    within_seconds(kDeadline, [&] {
      run_threads(2, [&](Communicator& comm) {
        DataParallelTrainer t(comm, config(8), data(), opt);
        t.step();
        t.reset_times();
        for (int s = 0; s < 5; ++s) t.step();
        const StepTimes& st = t.times();
        EXPECT_EQ(st.steps, 5u);
        EXPECT_GT(st.reduce_s, 0.0);
        EXPECT_LE(st.compute_s + st.wait_s + st.update_s, st.total_s * 1.0001 + 1e-9);
        EXPECT_EQ(t.sync()->buckets().size(), 3u);
      });
    });
  }
}

}  // namespace
