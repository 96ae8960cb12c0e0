// Data-parallel SGD across processes: under mpirun, N ranks with per-rank batch b end at the
// parameters one nn::Trainer with batch N·b reaches (each rank computes the one-rank run
// itself), blocking and overlapped, for every bucket size; the replicas stay identical. ZeRO's
// stages and 16-bit data parallelism take the bits they take on thread ranks.
//   mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/ch05_mpi_ddp_tests
// (ctest: ch05.mpi_ddp.np2, ch05.mpi_ddp.np4.) Every rank runs every test and the same
// collectives whatever its checks find, so one rank's failure cannot leave the others waiting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "concurdl/core/ranks.hpp"
#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/mpi_backend.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/dp/zero.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl::dp;
namespace nn = concurdl::nn;

Communicator& world() {
  static MpiCommunicator comm(MPI_COMM_WORLD);
  return comm;
}

// 98 samples of 32 features: the global batches below do not divide it, so the last batch of
// an epoch is short.
nn::Dataset make_data() { return nn::linear_problem(98, 32, 10, 4242); }

nn::TrainConfig config(std::size_t batch) {
  nn::TrainConfig c;
  c.spec.widths = {32, 24, 16, 10};
  c.batch = batch;
  c.seed = 3;
  c.sgd.lr = 0.05f;
  return c;
}

TEST(MpiDdp, NRanksEqualOneRankWithTheGlobalBatch) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset d = make_data();
  Communicator& comm = world();
  constexpr std::size_t b = 5;
  nn::Trainer one(config(b * static_cast<std::size_t>(comm.size())), d);
  for (int e = 0; e < 2; ++e) one.run_epoch();
  for (bool overlap : {false, true})
    for (std::size_t bucket : {std::size_t{0}, std::size_t{2048}, std::size_t{1} << 20})
      for (const char* algo : {"native", "v4_ring"}) {
        SCOPED_TRACE(std::string(overlap ? "overlap" : "blocking") + ", bucket " +
                     std::to_string(bucket) + ", " + algo);
        DataParallelOptions opt;
        opt.overlap = overlap;
        opt.bucket_bytes = bucket;
        opt.algorithm = algo;
        DataParallelTrainer t(comm, config(b), d, opt);
        for (int e = 0; e < 2; ++e) t.run_epoch();
        float worst = 0;
        for (std::size_t i = 0; i < one.model().parameters().size(); ++i)
          worst =
              std::max(worst, std::fabs(one.model().parameters()[i] - t.model().parameters()[i]));
        EXPECT_LE(worst, 2e-5f);
        EXPECT_EQ(t.state().step, one.state().step);
        EXPECT_EQ(replica_divergence(comm, t.model().parameters()), 0.0);
      }
}

// ZeRO across processes: every stage, blocking and overlapped, takes plain data parallelism's
// steps (v4_ring, one bucket per layer) bit for bit; 170-float last layer: uneven shards at 4.
TEST(MpiZero, EveryStageTakesTheRingAllReducesStepsBitForBit) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset d = make_data();
  Communicator& comm = world();
  DataParallelOptions plain;
  plain.algorithm = "v4_ring";
  plain.bucket_bytes = 0;
  DataParallelTrainer want(comm, config(5), d, plain);
  for (int e = 0; e < 2; ++e) want.run_epoch();
  const std::span<const float> wp = want.model().parameters();
  for (int stage = 0; stage <= 3; ++stage)
    for (bool overlap : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (overlap ? ", overlap" : ""));
      ZeroOptions z;
      z.stage = stage;
      z.overlap = overlap;
      ZeroTrainer t(comm, config(5), d, z);
      for (int e = 0; e < 2; ++e) t.run_epoch();
      const std::vector<float> got = t.gather_parameters();
      ASSERT_EQ(got.size(), wp.size());
      EXPECT_EQ(std::memcmp(got.data(), wp.data(), wp.size_bytes()), 0);
      EXPECT_EQ(t.state().step, want.state().step);
      EXPECT_EQ(replica_divergence(comm, got), 0.0);
      // The bytes each rank sent per step: the model's (N-1)/N of 2 or 3 tensors, within the
      // uneven blocks' float or so per layer.
      const double model = zero_model(t.parameter_count(), comm.size(), stage).sent_per_step;
      EXPECT_NEAR(static_cast<double>(t.step_bytes_sent()) / static_cast<double>(t.steps_counted()),
                  model, 3 * 3 * sizeof(float));
    }
}

// 16-bit data parallelism across processes: bf16 and fp16 replicas stay identical, and end at
// the bits the same run takes on as many thread ranks (the 16-bit ring is the same code over
// either backend); half the float32 ring's bytes.
TEST(MpiMixed, SixteenBitRanksEndAtTheThreadRanksBits) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset d = make_data();
  Communicator& comm = world();
  for (const nn::Precision p : {nn::Precision::bf16, nn::Precision::fp16}) {
    SCOPED_TRACE(std::string(nn::describe(p)));
    nn::TrainConfig c = config(5);
    c.precision = p;
    const std::uint64_t sent0 = comm.bytes_sent();
    DataParallelTrainer t(comm, c, d);
    for (int e = 0; e < 2; ++e) t.run_epoch();
    const std::uint64_t sent = comm.bytes_sent() - sent0;
    EXPECT_EQ(replica_divergence(comm, t.model().parameters()), 0.0);
    std::vector<float> threads_params;
    run_threads(comm.size(), [&](Communicator& tc) {
      DataParallelTrainer tt(tc, c, d);
      for (int e = 0; e < 2; ++e) tt.run_epoch();
      if (tc.rank() == 0)
        threads_params.assign(tt.model().parameters().begin(), tt.model().parameters().end());
    });
    const std::span<const float> got = t.model().parameters();
    ASSERT_EQ(threads_params.size(), got.size());
    EXPECT_EQ(std::memcmp(threads_params.data(), got.data(), got.size_bytes()), 0);
    // 2 (N-1) blocks of about Ψ/N values, 2 bytes each, per step.
    const double psi = static_cast<double>(got.size()), n = comm.size();
    const double per_step = static_cast<double>(sent) / static_cast<double>(t.state().step);
    EXPECT_NEAR(per_step, 2 * (n - 1) / n * psi * 2, 4 * 2 * n) << "bytes per step";
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  concurdl::ranks::init();
  if (concurdl::ranks::world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int mine = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  world().barrier();
  return worst;
}
