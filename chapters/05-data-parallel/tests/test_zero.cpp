// ZeRO stages 0-3 on the threads backend (zero.hpp): every stage takes the steps of plain data
// parallelism (v4_ring, one bucket per layer) bit for bit, and those of the native all-reduce
// within float tolerance, at 1, 2, 3, 4 and 8 ranks (layers whose sizes do not divide by the
// ranks), with and without the communication thread; the memory each rank holds is what the
// shards add up to, and ZeRO's model within a float a layer; the bytes sent per step are the
// ring's exactly, 1.5x for stage 3; checkpoints pass between the stages and plain data
// parallelism; a rank that throws mid-step fails the others within seconds. Exercise 5.3 (the
// student's ZeRO-2 steps, exercises/student_zero.hpp) runs through the equality checks too.
//   ch05_tests --gtest_filter='*Zero*'          ch05_tests --gtest_filter='ZeroEx5_3*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "../exercises/student_zero.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/dp/zero.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl::dp;
using concurdl::MemoryBytes;
using concurdl::MemoryKind;
using concurdl::testing::finishes_within;
using concurdl::testing::within_seconds;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;

// 98 samples: the global batches below do not divide it (a short last batch, and at 8 ranks x 5
// some ranks without rows in it).
const nn::Dataset& data() {
  static const nn::Dataset d = nn::linear_problem(98, 32, 10, 4711);
  return d;
}

nn::TrainConfig config(std::size_t batch) {
  nn::TrainConfig c;
  c.spec.widths = {32, 24, 16, 10};  // layers of 792, 400 and 170 floats: Ψ = 1362
  c.batch = batch;
  c.seed = 11;
  c.threads = 0;
  c.sgd.lr = 0.05f;
  c.lr_decay = 0.9f;  // the schedule must reach every stage's update too
  return c;
}

constexpr std::size_t kPsi = 1362;
const std::vector<std::size_t> kLayerSizes = {792, 400, 170};

struct State {
  std::vector<float> params, momentum;
  double loss = 0;
  std::uint64_t step = 0;
};

// Plain data parallelism, 2 epochs, rank 0's state.
State plain(int ranks, const char* algorithm) {
  concurdl::kernels::set_compute_threads(1);
  State s;
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      DataParallelOptions opt;
      opt.algorithm = algorithm;
      opt.bucket_bytes = 0;  // one bucket per layer, as ZeRO reduces
      DataParallelTrainer t(comm, config(5), data(), opt);
      double loss = 0;
      for (int e = 0; e < 2; ++e) loss = t.run_epoch().loss;
      if (comm.rank() == 0) {
        s.params.assign(t.model().parameters().begin(), t.model().parameters().end());
        s.momentum.assign(t.optimizer().velocity().begin(), t.optimizer().velocity().end());
        s.loss = loss;
        s.step = t.state().step;
      }
    });
  });
  return s;
}

struct ZeroRun {
  State state;
  float divergence = 0;  // largest difference of any rank's gathered parameters from rank 0's
};

ZeroRun zero(int ranks, int stage, bool overlap, const Zero2Steps& steps = {}) {
  concurdl::kernels::set_compute_threads(1);
  ZeroRun out;
  std::vector<std::vector<float>> params(static_cast<std::size_t>(ranks));
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      ZeroOptions z;
      z.stage = stage;
      z.overlap = overlap;
      z.zero2 = steps;
      ZeroTrainer t(comm, config(5), data(), z);
      double loss = 0;
      for (int e = 0; e < 2; ++e) loss = t.run_epoch().loss;
      params[static_cast<std::size_t>(comm.rank())] = t.gather_parameters();
      if (comm.rank() == 0) {
        out.state.momentum.assign(t.momentum_at_epoch_end().begin(),
                                  t.momentum_at_epoch_end().end());
        out.state.loss = loss;
        out.state.step = t.state().step;
      }
    });
  });
  out.state.params = params[0];
  for (const std::vector<float>& p : params)
    for (std::size_t i = 0; i < p.size(); ++i)
      out.divergence = std::max(out.divergence, std::fabs(p[i] - params[0][i]));
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

// --- equality with plain data parallelism ------------------------------------------------------

class ZeroEquality : public ::testing::TestWithParam<int> {};

TEST_P(ZeroEquality, EveryStageTakesTheRingAllReducesStepsBitForBit) {
  const int ranks = GetParam();
  const State ring = plain(ranks, "v4_ring");
  const State native = plain(ranks, "native");
  for (int stage = 0; stage <= 3; ++stage)
    for (bool overlap : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (overlap ? ", overlap" : ", blocking"));
      const ZeroRun z = zero(ranks, stage, overlap);
      EXPECT_EQ(z.state.step, ring.step);
      EXPECT_TRUE(same_bits(z.state.params, ring.params)) << "parameters differ from v4_ring's";
      EXPECT_TRUE(same_bits(z.state.momentum, ring.momentum)) << "momentum differs";
      EXPECT_EQ(z.state.loss, ring.loss);
      EXPECT_EQ(z.divergence, 0.0f) << "the ranks' parameters differ";
      // The native all-reduce adds in another order: float tolerance.
      EXPECT_LE(max_diff(z.state.params, native.params), 2e-5f);
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ZeroEquality, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// --- exercise 5.3: the student's ZeRO-2 steps ----------------------------------------------------

struct StepsImpl {
  const char* name;
  Zero2Steps steps;
};

class Zero2Steps5_3 : public ::testing::TestWithParam<StepsImpl> {};

// Every rank ends where plain data parallelism with the ring all-reduce ends (the student may
// reduce in another order: float tolerance; the reference: the same bits), every rank holds the
// same parameters, with the reductions on the compute thread and on the communication thread.
TEST_P(Zero2Steps5_3, EndsWhereTheRingAllReduceEnds) {
  const StepsImpl impl = GetParam();
  for (int ranks : {1, 2, 3, 4}) {
    const State ring = plain(ranks, "v4_ring");
    for (bool overlap : {false, true}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks" + (overlap ? ", overlap" : ""));
      CDL_TRY_EXERCISE({
        const ZeroRun z = zero(ranks, 2, overlap, impl.steps);
        EXPECT_EQ(z.state.step, ring.step);
        EXPECT_LE(max_diff(z.state.params, ring.params), 2e-5f);
        EXPECT_LE(max_diff(z.state.momentum, ring.momentum), 2e-5f);
        EXPECT_EQ(z.divergence, 0.0f) << "the ranks' parameters differ after the all-gathers";
        if (std::string(impl.name) == "reference") {
          EXPECT_TRUE(same_bits(z.state.params, ring.params));
        }
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ZeroReference, Zero2Steps5_3,
                         ::testing::Values(StepsImpl{"reference",
                                                     {&zero_reduce_layer, &zero_update_layer}}),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(ZeroEx5_3, Zero2Steps5_3,
                         ::testing::Values(StepsImpl{
                             "student", {&student_zero_reduce_layer, &student_zero_update_layer}}),
                         [](const auto& info) { return std::string(info.param.name); });

// --- memory and traffic -----------------------------------------------------------------------

struct Counted {
  MemoryBytes now, peak;        // over the epoch's steps (steps_memory())
  MemoryBytes after_epoch;      // the account after run_epoch: with what the writer gathered
  MemoryBytes after_next_step;  // and after one more step
  std::uint64_t sent_per_step = 0;
  std::size_t shard = 0;
};

// One epoch at `ranks`, `stage`: rank `who`'s account and bytes sent per step.
Counted count(int ranks, int stage, bool overlap, int who) {
  concurdl::kernels::set_compute_threads(1);
  Counted c;
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      ZeroOptions z;
      z.stage = stage;
      z.overlap = overlap;
      ZeroTrainer t(comm, config(5), data(), z);
      t.run_epoch();
      const MemoryBytes after_epoch = t.memory().current();
      if (comm.rank() == who) {
        c.now = t.steps_memory().now;
        c.peak = t.steps_memory().peak;
        c.after_epoch = after_epoch;
        c.sent_per_step = t.step_bytes_sent() / t.steps_counted();
        c.shard = t.shard_count();
      }
      t.step();
      if (comm.rank() == who) c.after_next_step = t.memory().current();
    });
  });
  return c;
}

// Floats rank r owns: its block of every layer.
std::size_t shard_of(int ranks, int r) {
  std::size_t n = 0;
  for (std::size_t p : kLayerSizes) n += block_of(p, ranks, r).count;
  return n;
}

// What the ring sends from rank r per step, exactly: a reduce-scatter sends every block but its
// own, an all-gather every block but its right neighbour's.
std::uint64_t ring_bytes(int ranks, int r, int stage) {
  if (ranks == 1) return 0;
  std::uint64_t floats = 0;
  for (std::size_t p : kLayerSizes) {
    const std::size_t rs = p - block_of(p, ranks, r).count;
    const std::size_t ag = p - block_of(p, ranks, (r + 1) % ranks).count;
    floats += rs + ag + (stage == 3 ? ag : 0);
  }
  return floats * sizeof(float);
}

TEST(ZeroMemory, EachStageHoldsWhatItsShardsAddUpTo) {
  for (int ranks : {2, 4})
    for (int who : {0, ranks - 1})
      for (int stage = 0; stage <= 3; ++stage) {
        SCOPED_TRACE(std::to_string(ranks) + " ranks, rank " + std::to_string(who) + ", stage " +
                     std::to_string(stage));
        const Counted c = count(ranks, stage, false, who);
        const std::uint64_t whole = kPsi * sizeof(float);
        const std::uint64_t shard = shard_of(ranks, who) * sizeof(float);
        EXPECT_EQ(c.shard * sizeof(float), shard);
        EXPECT_EQ(c.now[MemoryKind::parameters], stage >= 3 ? shard : whole);
        EXPECT_EQ(c.now[MemoryKind::gradients], stage >= 2 ? shard : whole);
        EXPECT_EQ(c.now[MemoryKind::optimizer], stage >= 1 ? shard : whole);
        EXPECT_GT(c.now[MemoryKind::activations], 0u);
        // ZeRO's model, Ψ/N per sharded term, within a float per layer (uneven blocks).
        const ZeroModel m = zero_model(kPsi, ranks, stage);
        const double slack = kLayerSizes.size() * sizeof(float);
        EXPECT_NEAR(static_cast<double>(c.now[MemoryKind::parameters]), m.parameters, slack);
        EXPECT_NEAR(static_cast<double>(c.now[MemoryKind::gradients]), m.gradients, slack);
        EXPECT_NEAR(static_cast<double>(c.now[MemoryKind::optimizer]), m.optimizer, slack);
        // While a step runs, stage 3 holds one whole layer's parameters at a time beside its
        // shard (no prefetch), stage 2-3 one whole layer's gradient.
        const std::uint64_t largest = kLayerSizes.front() * sizeof(float);
        if (stage >= 3) {
          EXPECT_EQ(c.peak[MemoryKind::parameters], shard + largest);
        }
        if (stage >= 2) {
          EXPECT_EQ(c.peak[MemoryKind::gradients], shard + largest);
        } else {
          EXPECT_EQ(c.peak[MemoryKind::gradients], whole);
        }
        // The optimizer state never exceeds the shard during the steps: no whole momentum.
        EXPECT_EQ(c.peak[MemoryKind::optimizer], stage >= 1 ? shard : whole);
        // Between epochs the writer holds the whole state it evaluates and saves (the momentum
        // from stage 1, the parameters at stage 3); the other ranks their shards only; the
        // next step frees it.
        const bool writer = who == 0;
        EXPECT_EQ(c.after_epoch[MemoryKind::optimizer],
                  stage >= 1 ? shard + (writer ? whole : 0) : whole);
        EXPECT_EQ(c.after_epoch[MemoryKind::parameters],
                  stage >= 3 ? shard + (writer ? whole : 0) : whole);
        EXPECT_EQ(c.after_epoch[MemoryKind::communication], 0u);
        EXPECT_EQ(c.after_next_step[MemoryKind::optimizer], stage >= 1 ? shard : whole);
        EXPECT_EQ(c.after_next_step[MemoryKind::parameters], stage >= 3 ? shard : whole);
      }
}

// Stage 3 against stage 0 at 4 ranks, read from the accounts: the state (parameters, gradients,
// momentum) kept between steps falls to about a quarter, and the peak of a step, which adds
// the activations and a layer in flight, stays below stage 0's by about what ZeRO's model saves.
TEST(ZeroMemory, StageThreeKeepsAQuarterOfStageZerosState) {
  const Counted s0 = count(4, 0, false, 1), s3 = count(4, 3, false, 1);
  const auto state = [](const MemoryBytes& b) {
    return static_cast<double>(b[MemoryKind::parameters] + b[MemoryKind::gradients] +
                               b[MemoryKind::optimizer]);
  };
  EXPECT_NEAR(state(s3.now) / state(s0.now), 0.25, 0.01);
  const double saved = zero_model(kPsi, 4, 0).total() - zero_model(kPsi, 4, 3).total();
  EXPECT_NEAR(static_cast<double>(s0.peak.total()) - static_cast<double>(s3.peak.total()), saved,
              static_cast<double>(kLayerSizes.front() * sizeof(float)) * 3);
}

TEST(ZeroMemory, PrefetchHoldsAtMostTwoLayersAtOnce) {
  const Counted c = count(4, 3, true, 1);
  const std::uint64_t shard = shard_of(4, 1) * sizeof(float);
  const std::uint64_t two = (kLayerSizes[0] + kLayerSizes[1]) * sizeof(float);
  EXPECT_GT(c.peak[MemoryKind::parameters], shard + kLayerSizes[0] * sizeof(float));
  EXPECT_LE(c.peak[MemoryKind::parameters], shard + two);
}

TEST(ZeroTraffic, BytesSentAreTheRingsAndStageThreeSendsHalfAgainAsMuch) {
  for (int ranks : {1, 2, 3, 4})
    for (int who = 0; who < ranks; ++who) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, rank " + std::to_string(who));
      std::uint64_t sent[4] = {};
      for (int stage = 0; stage <= 3; ++stage) {
        sent[stage] = count(ranks, stage, stage % 2 == 1, who).sent_per_step;
        EXPECT_EQ(sent[stage], ring_bytes(ranks, who, stage)) << "stage " << stage;
        if (ranks > 1) {
          EXPECT_NEAR(
              static_cast<double>(sent[stage]) / zero_model(kPsi, ranks, stage).sent_per_step, 1.0,
              0.01)
              << "stage " << stage;
        }
      }
      EXPECT_EQ(sent[1], sent[0]);
      EXPECT_EQ(sent[2], sent[0]);
      if (ranks > 1) {
        EXPECT_NEAR(static_cast<double>(sent[3]) / static_cast<double>(sent[0]), 1.5, 0.01);
      }
    }
}

TEST(ZeroModel, FollowsZerosAccounting) {
  const ZeroModel s0 = zero_model(1000, 4, 0), s3 = zero_model(1000, 4, 3);
  EXPECT_DOUBLE_EQ(s0.total(), 12000.0);  // 4Ψ + 4Ψ + 4Ψ bytes
  EXPECT_DOUBLE_EQ(zero_model(1000, 4, 1).total(), 4000 + 4000 + 1000.0);
  EXPECT_DOUBLE_EQ(zero_model(1000, 4, 2).total(), 4000 + 1000 + 1000.0);
  EXPECT_DOUBLE_EQ(s3.total(), 3000.0);
  EXPECT_DOUBLE_EQ(s0.sent_per_step, 2 * 4000 * 0.75);
  EXPECT_DOUBLE_EQ(s3.sent_per_step, 3 * 4000 * 0.75);
}

// --- checkpoints ------------------------------------------------------------------------------

TEST(ZeroCheckpoint, PassesBetweenStagesAndPlainDataParallelism) {
  concurdl::kernels::set_compute_threads(1);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("concurdl_zero_ck_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path ck = dir / "ck.bin";
  // Plain data parallelism, 2 epochs straight.
  const State want = plain(3, "v4_ring");
  // Stage 3 for one epoch, saved; then stage 1 resumes for the second; then plain reads it.
  std::vector<float> got, momentum;
  within_seconds(kDeadline, [&] {
    run_threads(3, [&](Communicator& comm) {
      {
        ZeroTrainer a(comm, config(5), data(), {.stage = 3});
        a.run_epoch();
        if (comm.rank() == 0) a.save(ck);
        comm.barrier();
      }
      ZeroTrainer b(comm, config(5), data(), {.stage = 1});
      b.resume(ck);
      b.run_epoch();
      const std::vector<float> p = b.gather_parameters();
      if (comm.rank() == 0) {
        got = p;
        momentum.assign(b.momentum_at_epoch_end().begin(), b.momentum_at_epoch_end().end());
      }
    });
  });
  EXPECT_TRUE(same_bits(got, want.params));
  EXPECT_TRUE(same_bits(momentum, want.momentum));
  std::filesystem::remove_all(dir);
}

// --- failures ----------------------------------------------------------------------------------

TEST(ZeroFailure, ARankThatThrowsMidStepFailsEveryRank) {
  for (int stage : {1, 3})
    for (bool overlap : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (overlap ? ", overlap" : ""));
      std::string what;
      EXPECT_TRUE(finishes_within(kDeadline, [&] {
        concurdl::kernels::set_compute_threads(1);
        try {
          run_threads(4, [&](Communicator& comm) {
            ZeroOptions z;
            z.stage = stage;
            z.overlap = overlap;
            int steps = 0;
            z.after_compute = [&steps](int rank, double) {
              if (rank == 2 && ++steps == 3) throw std::runtime_error("rank 2 broke at step 3");
            };
            ZeroTrainer t(comm, config(5), data(), z);
            t.run_epoch();
          });
        } catch (const std::exception& e) {
          what = e.what();
        }
      }));
      EXPECT_NE(what.find("rank 2 broke at step 3"), std::string::npos) << what;
    }
}

TEST(ZeroOptionsCheck, AStageOutsideZeroToThreeIsAUsageError) {
  concurdl::kernels::set_compute_threads(1);
  run_threads(1, [&](Communicator& comm) {
    EXPECT_THROW(ZeroTrainer(comm, config(5), data(), {.stage = 4}), concurdl::UsageError);
  });
}

}  // namespace
