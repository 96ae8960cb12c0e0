// Chapter 06 across processes: under mpirun, Megatron's MLP block split over the ranks equals
// the unsplit block (output, input gradient, each rank's slice of the weight gradients), a
// pipeline step of every schedule, one stage per rank, gives each stage the whole batch's
// gradients and the last stage the whole batch's loss, for m = 1 .. 8 (uneven micro-batches),
// and the MoE layer with its experts over the ranks (MPI_Alltoallv and the pairwise exchange)
// routes and drops as nn::MoeLayer on the concatenated batch and computes its outputs and
// gradients.
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/bin/ch06_mpi_tests
// (ctest: ch06.mpi.np2, ch06.mpi.np3.) Every rank runs every test and the same communication
// whatever its checks find, so one rank's failure cannot leave the others waiting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "concurdl/core/ranks.hpp"
#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/mpi_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/expert_parallel.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "concurdl/mp/three_d.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/moe.hpp"
#include "concurdl/nn/trainer.hpp"
#include "counted_figures.hpp"

namespace {

using namespace concurdl::mp;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;
using concurdl::kernels::GemmVersion;

dp::Communicator& world() {
  static dp::MpiCommunicator comm(MPI_COMM_WORLD);
  return comm;
}

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

// The largest difference relative to 1 + |want|.
float worst(std::span<const float> got, std::span<const float> want) {
  float w = got.size() == want.size() ? 0.0f : 1e9f;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    w = std::max(w, std::fabs(got[i] - want[i]) / (1.0f + std::fabs(want[i])));
  return w;
}

TEST(MpiTensorParallel, MlpBlockEqualsTheUnsplitBlock) {
  concurdl::kernels::set_compute_threads(1);
  dp::Communicator& comm = world();
  const int p = comm.size(), r = comm.rank();
  constexpr std::size_t batch = 7, in = 10, out = 6;
  const std::size_t hidden = 4 * static_cast<std::size_t>(p) * 3;
  const std::vector<float> x = values(batch * in, 3), dy = values(batch * out, 4);
  nn::Mlp whole(nn::MlpSpec{{in, hidden, out}}, 5, GemmVersion::v2_ikj);
  nn::Activations a;
  whole.forward_layers(0, 2, x.data(), batch, a);
  const std::vector<float> y_want(a.output(), a.output() + batch * out);
  std::vector<float> dx_want(batch * in);
  whole.backward_layers(0, 2, a, dy.data(), dx_want.data());
  const auto span_of = [](const nn::LayerView& v) {
    return std::span<const float>(v.w.data, v.w.rows * v.w.cols);
  };
  ParallelMlpBlock block(comm, span_of(whole.layer(0)), whole.layer(0).b, span_of(whole.layer(1)),
                         whole.layer(1).b, in, hidden, out, GemmVersion::v2_ikj);
  std::vector<float> y(batch * out), dx(batch * in);
  block.forward(x.data(), batch, y.data());
  block.backward(dy.data(), batch, dx.data());
  EXPECT_LE(worst(y, y_want), 1e-5f);
  EXPECT_LE(worst(dx, dx_want), 1e-5f);
  EXPECT_EQ(block.all_reduces(), 2u);
  const LinearShard want1 =
      column_shard(span_of(whole.layer_gradient(0)), whole.layer_gradient(0).b, in, hidden, r, p);
  const LinearShard want2 =
      row_shard(span_of(whole.layer_gradient(1)), whole.layer_gradient(1).b, hidden, out, r, p);
  EXPECT_LE(worst(block.first().shard().dw, want1.w), 1e-5f);
  EXPECT_LE(worst(block.first().shard().db, want1.b), 1e-5f);
  EXPECT_LE(worst(block.second().shard().dw, want2.w), 1e-5f);
  EXPECT_LE(worst(block.second().shard().db, want2.b), 1e-5f);
}

TEST(MpiPipeline, EveryScheduleGivesEachStageTheWholeBatchsGradients) {
  concurdl::kernels::set_compute_threads(1);
  dp::Communicator& comm = world();
  const int p = comm.size(), s = comm.rank();
  const nn::MlpSpec spec{{6, 10, 9, 8, 7, 8, 9, 6, 5}};  // 8 layers: up to 4 stages x 2 chunks
  constexpr std::size_t rows = 17;
  const std::vector<float> x = values(rows * spec.widths.front(), 7);
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 5);
  nn::Mlp whole(spec, 5, GemmVersion::v2_ikj);
  const float loss = whole.forward_backward(x.data(), labels.data(), rows);
  const auto& off = whole.layer_offsets();
  for (const auto& [schedule, chunks] :
       {std::pair{Schedule::naive, 1}, std::pair{Schedule::gpipe, 1},
        std::pair{Schedule::one_f_one_b, 1}, std::pair{Schedule::zb_h1, 1},
        std::pair{Schedule::interleaved, 2}}) {
    const std::vector<std::size_t> bounds = stage_boundaries(spec.widths.size() - 1, p * chunks);
    for (std::size_t m : {1, 2, 3, 8}) {
      SCOPED_TRACE(std::string(schedule_name(schedule)) + " m=" + std::to_string(m));
      nn::Mlp model(spec, 5, GemmVersion::v2_ikj);
      const PipelineStepResult r =
          pipeline_step(comm, model, bounds, x.data(), labels.data(), rows, m, schedule);
      for (int c = 0; c < chunks; ++c) {
        const auto piece = static_cast<std::size_t>(c * p + s);
        const std::size_t lo = off[bounds[piece]], hi = off[bounds[piece + 1]];
        EXPECT_LE(
            worst(model.gradients().subspan(lo, hi - lo), whole.gradients().subspan(lo, hi - lo)),
            1e-5f)
            << "stage " << s << " chunk " << c;
      }
      if (s == p - 1) {
        EXPECT_NEAR(r.loss_sum / rows, loss, 1e-5);
      }
      comm.barrier();
    }
  }
}

// The pipeline trainer one stage a process (`concurdl train --pipeline P --backend mpi`): two
// epochs of each kind of schedule end at the parameters (bit for bit), the loss and the counted
// memory of the trainer that runs the same stages as threads of one process (run on rank 0
// beside it), and every stage process reports its own resident memory.
TEST(MpiPipelineTrainer, OneStageAProcessTakesTheStepsOfTheThreadedStages) {
  concurdl::kernels::set_compute_threads(1);
  dp::Communicator& comm = world();
  const int p = comm.size();
  const nn::Dataset data = nn::linear_problem(57, 6, 5, 11);
  nn::TrainConfig c;
  c.spec = nn::MlpSpec{{6, 10, 9, 8, 7, 8, 9, 6, 5}};
  c.batch = 10;
  c.seed = 3;
  c.threads = 1;
  c.gemm = GemmVersion::v2_ikj;
  using concurdl::mp::testing::counted;
  for (const Schedule schedule : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::zb_h1}) {
    SCOPED_TRACE(std::string(schedule_name(schedule)));
    const PipelineOptions o{.stages = p, .batching = {.micro_batches = 4, .schedule = schedule}};
    PipelineTrainer t(comm, c, data, o);
    nn::EpochResult got;
    for (int e = 0; e < 2; ++e) got = t.run_epoch({}, 0);
    if (t.writer()) {
      PipelineTrainer whole(c, data, o);
      nn::EpochResult want;
      for (int e = 0; e < 2; ++e) want = whole.run_epoch({}, 0);
      EXPECT_EQ(t.parameters(), whole.parameters());
      EXPECT_EQ(got.loss, want.loss);
      EXPECT_EQ(counted(t.epoch_metrics()), counted(whole.epoch_metrics()));
      for (int s = 0; s < p; ++s)
        EXPECT_GT(t.epoch_metrics().at("stage" + std::to_string(s) + "_resident_peak_bytes"), 0.0)
            << "stage " << s;
    } else {
      EXPECT_THROW((void)t.parameters(), std::logic_error);
    }
    comm.barrier();
  }
}

// 3D parallelism across processes: every grid of this many ranks (2: 2x1x1, 1x2x1, 1x1x2; 4:
// 2x2x1, 2x1x2, 1x2x2, 4x1x1, 1x4x1, 1x1x4, ...) gives every rank one process's gradients.
TEST(MpiThreeD, EveryGridGivesEveryRankTheWholeBatchsGradients) {
  concurdl::kernels::set_compute_threads(1);
  dp::Communicator& comm = world();
  const int n = comm.size();
  const nn::MlpSpec spec{{6, 8, 12, 8, 12, 8, 5}};  // 6 layers; hidden widths divide by 2 and 4
  constexpr std::size_t rows = 26;
  const std::vector<float> x = values(rows * spec.widths.front(), 3);
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>((i * 7) % 5);
  nn::Mlp whole(spec, 9, GemmVersion::v2_ikj);
  const float loss = whole.forward_backward(x.data(), labels.data(), rows);
  int grids = 0;
  for (int t : {1, 2, 4})
    for (int p = 1; p <= 6; ++p) {
      if (n % (t * p) != 0) continue;
      const Grid g{n / (t * p), t, p};
      SCOPED_TRACE(g.describe());
      ++grids;
      GridGroups groups = split_grid(comm, g);
      nn::Mlp init(spec, 9);
      ThreeDRank rank = make_three_d_rank(groups, g, spec, init.parameters(), GemmVersion::v2_ikj);
      const ThreeDStepResult r =
          three_d_step(groups, rank, x.data(), labels.data(), rows, 3, Schedule::one_f_one_b);
      std::vector<float> mine(whole.parameters().size(), std::nanf(""));
      rank.stage->scatter_gradients(mine);
      float worst_diff = 0;
      for (std::size_t i = 0; i < mine.size(); ++i)
        if (!std::isnan(mine[i]))
          worst_diff = std::max(worst_diff, std::fabs(mine[i] - whole.gradients()[i]) /
                                                (1.0f + std::fabs(whole.gradients()[i])));
      EXPECT_LE(worst_diff, 2e-5f) << "rank " << comm.rank();
      EXPECT_NEAR(r.loss_sum / rows, loss, 1e-5);
      comm.barrier();
    }
  EXPECT_GE(grids, 1);
}

// Expert parallelism across processes: 8 experts over the ranks, uneven shards; every rank
// computes the whole batch's reference itself and checks its own part against it.
TEST(MpiExpertParallel, EqualsTheSingleProcessLayer) {
  concurdl::kernels::set_compute_threads(1);
  dp::Communicator& comm = world();
  const int p = comm.size(), r = comm.rank();
  constexpr std::size_t d = 6;
  std::vector<std::size_t> at{0};
  for (int s = 0; s < p; ++s) at.push_back(at.back() + 3 + static_cast<std::size_t>(5 * s) % 7);
  const std::size_t T = at.back(), lo = at[static_cast<std::size_t>(r)];
  const std::size_t n = at[static_cast<std::size_t>(r) + 1] - lo;
  const std::vector<float> x = values(T * d, 21), dy = values(T * d, 22);
  for (const std::size_t k : {1, 2})
    for (const bool dropless : {false, true})
      for (const TokenExchangeVariant& ex : kTokenExchangeVariants) {
        SCOPED_TRACE("k=" + std::to_string(k) + (dropless ? " dropless " : " cf=1 ") +
                     std::string(ex.name));
        const nn::MoeSpec spec{.width = d,
                               .hidden = 5,
                               .experts = 8,
                               .top_k = k,
                               .capacity_factor = 1.0,
                               .dropless = dropless,
                               .aux_alpha = 0.01f};
        nn::MoeLayer whole(spec, 13, GemmVersion::v2_ikj);
        const nn::LayerView router = whole.router();
        for (std::size_t i = 0; i < router.w.rows * router.w.cols; ++i) router.w.data[i] *= 4.0f;
        router.b[0] = 0.5f;  // expert 0 popular: capacity bites
        std::vector<float> y(T * d), dx(T * d);
        const nn::MoeStats want = whole.forward(x.data(), T, y.data());
        whole.backward(dy.data(), dx.data());
        ExpertParallelMoe ep(comm, spec, 13,
                             {.gemm = GemmVersion::v2_ikj, .exchange = ex.exchange});
        std::ranges::copy(whole.router_parameters(), ep.router_parameters().begin());
        for (std::size_t e = ep.first_expert(); e < ep.first_expert() + ep.local_experts(); ++e)
          std::ranges::copy(whole.expert_parameters(e), ep.expert_parameters(e).begin());
        std::vector<float> my_y(n * d), my_dx(n * d);
        ep.forward(x.data() + lo * d, n, my_y.data());
        ep.backward(dy.data() + lo * d, my_dx.data());
        ep.all_reduce_router_gradients();
        const nn::MoeStats& got = ep.stats().global;
        EXPECT_EQ(got.kept, want.kept);
        EXPECT_EQ(got.dropped, want.dropped);
        EXPECT_EQ(got.tokens_passed, want.tokens_passed);
        if (!dropless) {
          EXPECT_GT(want.dropped, 0u);
        }
        std::size_t same = 0;
        for (std::size_t i = 0; i < n * k; ++i) {
          const nn::MoeRoute &a = ep.routes()[i], &b = whole.routes()[lo * k + i];
          same += a.expert == b.expert && a.kept == b.kept && (!b.kept || a.slot == b.slot) &&
                  a.gate == b.gate;
        }
        EXPECT_EQ(same, n * k) << "routes differ on rank " << r;
        const auto mine = [&](const std::vector<float>& v) {
          return std::span<const float>(v).subspan(lo * d, n * d);
        };
        EXPECT_LE(worst(my_y, mine(y)), 1e-6f);
        EXPECT_LE(worst(my_dx, mine(dx)), 1e-6f);
        EXPECT_LE(worst(ep.router_gradients(), whole.router_gradients()), 1e-6f);
        for (std::size_t e = ep.first_expert(); e < ep.first_expert() + ep.local_experts(); ++e)
          EXPECT_LE(worst(ep.expert_gradients(e), whole.expert_gradients(e)), 1e-6f) << e;
        const std::uint64_t counted =
            ex.exchange == TokenExchange::pairwise ? ep.stats().payload_bytes : 0;
        EXPECT_EQ(ep.stats().bytes_sent_forward, counted);
        comm.barrier();
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
  int worst_rc = 0;
  MPI_Allreduce(&mine, &worst_rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  world().barrier();
  return worst_rc;
}
