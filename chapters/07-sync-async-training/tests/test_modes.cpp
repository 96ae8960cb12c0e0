// The training modes end to end on a small problem: with one worker every asynchronous mode
// takes exactly nn::Trainer's steps; at 1/2/4/8 workers each learns, counts every batch once,
// and keeps its promises (SSP's bound, no staleness in local SGD); sync with N workers and a
// straggler ends where one trainer with the N-times batch does; a failed worker is dropped by
// the asynchronous modes and stops the synchronous one with its message; checkpoints resume and
// refuse another mode's or worker count's by name.
//   ch07_tests --gtest_filter='Modes*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "concurdl/asgd/async_trainer.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/train_backends.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "test_util.hpp"

namespace {

// Chapter 05's threads backend, as `concurdl train --backend threads` runs it (the tests link
// chapter 05's code, not the program's registrations).
const concurdl::nn::DistributedBackend* threads_backend() {
  static const std::vector<concurdl::nn::DistributedBackend> backends =
      concurdl::dp::train_backends();
  for (const concurdl::nn::DistributedBackend& b : backends)
    if (b.name == "threads") return &b;
  return nullptr;
}

using namespace concurdl::asgd;
using ch07_test::problem;
using ch07_test::small_config;
using concurdl::testing::within_seconds;
namespace nn = concurdl::nn;
namespace fs = std::filesystem;

constexpr int kDeadline = 120;

AsyncOptions options(const std::string& mode, int workers) {
  AsyncOptions o;
  o.mode = mode;
  o.workers = workers;
  o.staleness = 2;
  o.local_steps = 3;
  return o;
}

std::vector<float> trainer_after(std::size_t epochs) {
  nn::Trainer t(small_config(), problem());
  for (std::size_t e = 0; e < epochs; ++e) t.run_epoch();
  const auto p = t.model().parameters();
  return {p.begin(), p.end()};
}

class ModesEach : public ::testing::TestWithParam<std::string> {};

// One worker: the same batches in the same order, one SGD step each: nn::Trainer's bits.
TEST_P(ModesEach, OneWorkerTakesExactlyPlainSgdSteps) {
  within_seconds(kDeadline, [&] {
    AsyncTrainer t(small_config(), problem(), options(GetParam(), 1));
    for (int e = 0; e < 2; ++e) t.run_epoch({}, 0);
    const std::vector<float> ref = trainer_after(2);
    const std::vector<float> got = t.parameters();
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0);
    EXPECT_EQ(t.state().epoch, 2u);
    EXPECT_EQ(t.state().step, 2u * 25u);  // 200 samples in batches of 8
    if (GetParam() != "local-sgd") {
      EXPECT_EQ(t.staleness().max(), 0u);
    }
  });
}

// 1, 2, 4, 8 workers: every batch of the epoch computed exactly once, the loss going down, and
// each mode's own promise.
TEST_P(ModesEach, ManyWorkersCountEveryBatchOnceAndLearn) {
  for (int workers : {1, 2, 4, 8}) {
    within_seconds(kDeadline, [&] {
      AsyncTrainer t(small_config(), problem(), options(GetParam(), workers));
      const nn::EvalResult before = t.evaluate(problem());
      nn::EpochResult r;
      for (int e = 0; e < 4; ++e) r = t.run_epoch({}, 0);
      EXPECT_EQ(r.samples, problem().n) << workers << " workers";
      std::size_t batches = 0;
      for (std::size_t b : t.batches_per_worker()) batches += b;
      EXPECT_EQ(batches, 25u) << workers << " workers";
      const nn::EvalResult after = t.evaluate(problem());
      EXPECT_TRUE(std::isfinite(after.loss));
      EXPECT_LT(after.loss, before.loss) << workers << " workers";
      const auto m = t.epoch_metrics();
      EXPECT_EQ(m.at("workers_lost"), 0.0);
      if (GetParam() == "ps-ssp") {
        EXPECT_LE(t.ssp_max_lead(), 2u) << workers << " workers";
      }
      if (GetParam() == "local-sgd") {
        EXPECT_EQ(m.count("staleness_max"), 0u);
      } else {
        EXPECT_EQ(t.staleness().count(), 25u) << "one staleness per update";
      }
    });
  }
}

// A worker that throws mid-run: the asynchronous modes drop it and finish the epochs.
TEST_P(ModesEach, AFailedWorkerIsDroppedOrStopsTheRun) {
  within_seconds(kDeadline, [&] {
    // Worker 1 fails before its first step (a later step might never come: the others may
    // take every batch first).
    AsyncOptions o = options(GetParam(), 3);
    o.fail_worker = 1;
    o.fail_after = 0;
    AsyncTrainer t(small_config(), problem(), o);
    if (GetParam() == "local-sgd") {
      // Synchronous at its averages: the run fails, naming the worker.
      try {
        t.run_epoch({}, 0);
        FAIL() << "local-sgd went on without a worker";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("worker 1 failed"), std::string::npos) << e.what();
      }
      return;
    }
    nn::EpochResult r;
    for (int e = 0; e < 3; ++e) r = t.run_epoch({}, 0);
    EXPECT_EQ(t.epoch_metrics().at("workers_lost"), 1.0);
    EXPECT_EQ(t.batches_per_worker()[1], 0u) << "a lost worker stays lost";
    EXPECT_EQ(r.samples, problem().n) << "the others computed every batch";
    EXPECT_TRUE(std::isfinite(t.evaluate(problem()).loss));
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, ModesEach,
                         ::testing::Values("ps-async", "ps-ssp", "hogwild", "local-sgd"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// A straggler: the parameter server's other worker takes more of the epoch's batches. The
// small problem's batch is a few microseconds of work, so a 4x straggler sleeps less than one
// scheduling quantum and a loaded machine (CI runs tests side by side) can stall worker 0 for
// longer than the straggler's whole epoch: CI once saw 10 vs 15. At 200x the straggler sleeps
// ~200 batches' time after each of its own, and the counts are summed over three epochs (each
// starts its threads afresh), so a worker 0 that starts late once does not decide it.
TEST(Modes, AStragglerTakesFewerBatchesUnderAParameterServer) {
  within_seconds(kDeadline, [&] {
    AsyncOptions o = options("ps-async", 2);
    o.stragglers[1] = 200.0;
    AsyncTrainer t(small_config(), problem(), o);
    std::size_t fast = 0, slow = 0;
    for (int e = 0; e < 3; ++e) {
      t.run_epoch({}, 0);
      fast += t.batches_per_worker()[0];
      slow += t.batches_per_worker()[1];
    }
    EXPECT_GT(fast, slow);
  });
}

// Sync through the train command's "threads" backend with a straggler: N workers with batch b
// end where one trainer with batch N b does (float tolerance): the straggler slows, never
// changes, a synchronous run.
TEST(Modes, SyncWithAStragglerEqualsOneTrainerWithTheWholeBatch) {
  within_seconds(kDeadline, [&] {
    const nn::DistributedBackend* b = threads_backend();
    ASSERT_NE(b, nullptr);
    nn::DistributedOptions d;
    d.ranks = 2;
    d.stragglers[1] = 3.0;
    std::vector<float> got;
    b->run(d, small_config(4), problem(), [&](nn::RankTrainer& t) {
      for (int e = 0; e < 2; ++e) t.run_epoch({}, 0);
      if (t.writer()) {
        const fs::path ck = fs::temp_directory_path() / "ch07_sync_straggler.ckpt";
        t.save(ck);
        nn::Mlp m(small_config().spec, 3);
        nn::Sgd s(m.parameters().size(), small_config().sgd);
        const nn::TrainState st = nn::load_checkpoint(ck, m, s);
        EXPECT_EQ(st.mode, "sync");
        EXPECT_EQ(st.workers, 2u);
        got.assign(m.parameters().begin(), m.parameters().end());
        fs::remove(ck);
      }
    });
    const std::vector<float> ref = trainer_after(2);  // batch 8 = 2 x 4
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5f) << i;
  });
}

TEST(Modes, SyncStopsWithTheFailedRanksMessage) {
  within_seconds(kDeadline, [&] {
    const nn::DistributedBackend* b = threads_backend();
    nn::DistributedOptions d;
    d.ranks = 2;
    d.fail_worker = 1;
    d.fail_after = 3;
    try {
      b->run(d, small_config(4), problem(), [&](nn::RankTrainer& t) { t.run_epoch({}, 0); });
      FAIL() << "a synchronous run went on without a rank";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 failed after 3 steps"), std::string::npos)
          << e.what();
    }
  });
}

TEST(Modes, CheckpointsResumeTheirModeAndRefuseAnothersByName) {
  within_seconds(kDeadline, [&] {
    const fs::path ck = fs::temp_directory_path() / "ch07_modes.ckpt";
    AsyncTrainer a(small_config(), problem(), options("ps-async", 2));
    a.run_epoch({}, 0);
    a.save(ck);
    AsyncTrainer same(small_config(), problem(), options("ps-async", 2));
    same.resume(ck);
    EXPECT_EQ(same.parameters(), a.parameters());
    EXPECT_EQ(same.state().epoch, 1u);
    for (const auto& [mode, workers] :
         std::vector<std::pair<std::string, int>>{{"hogwild", 2}, {"ps-async", 4}}) {
      AsyncTrainer other(small_config(), problem(), options(mode, workers));
      const std::vector<float> before = other.parameters();
      try {
        other.resume(ck);
        FAIL() << mode << " x " << workers << " resumed a ps-async x 2 checkpoint";
      } catch (const nn::CheckpointError& e) {
        EXPECT_NE(std::string(e.what()).find("mode ps-async with 2 workers"), std::string::npos)
            << e.what();
      }
      EXPECT_EQ(other.parameters(), before) << "a refused checkpoint changes nothing";
    }
    // And the synchronous trainer refuses it too.
    const nn::DistributedBackend* b = threads_backend();
    nn::DistributedOptions d;
    d.ranks = 2;
    EXPECT_THROW(b->run(d, small_config(4), problem(), [&](nn::RankTrainer& t) { t.resume(ck); }),
                 nn::CheckpointError);
    fs::remove(ck);
  });
}

}  // namespace
