// Pipeline parallelism (pipeline.hpp): for every schedule (interleaved at v = 2 and 3 chunks),
// p = 1..4 stages and m = 1..16 micro-batches, one step on thread ranks gives each stage's
// layers the gradients one process computes on the whole batch (float tolerance), and the same
// loss; no schedule deadlocks (a deadline on every test); each stage holds the micro-batches
// and bytes its order's model says (GPipe all m, 1F1B at most p - s, ZB-H1 min(m, p));
// 1F1B, interleaved and ZB-H1 give the same bits; recomputing the activations gives the same
// bits and holds fewer bytes; the idealised timeline of every order gives its bubble formula.
//   ch06_tests --gtest_filter='Pipeline*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/nn/mlp.hpp"

namespace {

using namespace concurdl::mp;
using concurdl::testing::within_seconds;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;
constexpr std::size_t kRows = 17;  // divides by none of m > 1: uneven micro-batches
const nn::MlpSpec kSpec{{6, 10, 9, 8, 7, 8, 9, 6, 5}};  // 8 layers: 4 stages x 2 chunks

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

// Interleaving with m not a multiple of p: every forward first.
bool all_forwards_first(Schedule schedule, int stages, std::size_t m) {
  return schedule == Schedule::interleaved && m % static_cast<std::size_t>(stages) != 0;
}

class PipelineSchedules
    : public ::testing::TestWithParam<std::tuple<Schedule, int, int>> {  // schedule, stages, chunks
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};

TEST_P(PipelineSchedules, EveryStageGetsTheWholeBatchsGradientAndNothingDeadlocks) {
  // Not a structured binding: clang 14 cannot capture one in a lambda.
  const Schedule schedule = std::get<0>(GetParam());
  const int stages = std::get<1>(GetParam());
  const int chunks = std::get<2>(GetParam());
  const std::vector<float> x = values(kRows * kSpec.widths.front(), 7);
  std::vector<std::uint8_t> labels(kRows);
  for (std::size_t i = 0; i < kRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 5);
  nn::Mlp whole(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj);
  std::size_t correct_ref = 0;
  const float loss_ref = whole.forward_backward(x.data(), labels.data(), kRows, &correct_ref);
  const std::vector<std::size_t> bounds =
      stage_boundaries(kSpec.widths.size() - 1, stages * chunks);
  for (std::size_t m : {1, 2, 3, 4, 8, 16}) {
    within_seconds(kDeadline, [&] {
      dp::run_threads(stages, [&](dp::Communicator& comm) {
        nn::Mlp model(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj);
        const PipelineStepResult r =
            pipeline_step(comm, model, bounds, x.data(), labels.data(), kRows, m, schedule);
        const int s = comm.rank();
        const auto& off = model.layer_offsets();
        const auto got = model.gradients(), want = whole.gradients();
        for (int c = 0; c < chunks; ++c) {
          const auto piece = static_cast<std::size_t>(c * stages + s);
          for (std::size_t i = off[bounds[piece]]; i < off[bounds[piece + 1]]; ++i)
            ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
                << schedule_name(schedule) << " p=" << stages << " v=" << chunks << " m=" << m
                << " stage " << s << " gradient " << i;
        }
        if (s == stages - 1) {
          EXPECT_NEAR(r.loss_sum / kRows, loss_ref, 1e-5);
          EXPECT_EQ(r.correct, correct_ref);
        }
        // Activations held at once: GPipe all m, 1F1B at most p - s, ZB-H1 min(m, p) on every
        // stage, interleaved its warm-up's forwards and one, naive one; and what the order's
        // model says, in micro-batches and, at most, in bytes (the micro-batches are uneven:
        // the model's are all of the largest one's rows).
        const auto pu = static_cast<std::size_t>(stages), su = static_cast<std::size_t>(s);
        const std::size_t want_peak =
            schedule == Schedule::gpipe               ? m
            : schedule == Schedule::naive             ? 1
            : schedule == Schedule::zb_h1             ? std::min(m, pu)
            : all_forwards_first(schedule, stages, m) ? m * static_cast<std::size_t>(chunks)
            : schedule == Schedule::interleaved
                ? std::min(m * static_cast<std::size_t>(chunks),
                           2 * (pu - su - 1) + (static_cast<std::size_t>(chunks) - 1) * pu + 1)
                : std::min(m, pu - su);
        EXPECT_EQ(r.peak_activations, want_peak)
            << schedule_name(schedule) << " p=" << stages << " m=" << m << " stage " << s;
        const std::vector<PipeOp> order = stage_order(schedule, s, stages, m, chunks);
        const ActivationModel am =
            activation_model(kSpec, bounds, s, stages, order,
                             dp::block_of(kRows, static_cast<int>(m), 0).count, false);
        EXPECT_EQ(am.peak_in_flight, r.peak_activations) << "stage " << s << " m=" << m;
        EXPECT_LE(r.peak_activation_bytes, am.peak_bytes) << "stage " << s << " m=" << m;
      });
    });
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, PipelineSchedules,
    ::testing::Values(
        std::tuple{Schedule::naive, 1, 1}, std::tuple{Schedule::naive, 2, 1},
        std::tuple{Schedule::naive, 3, 1}, std::tuple{Schedule::naive, 4, 1},
        std::tuple{Schedule::gpipe, 1, 1}, std::tuple{Schedule::gpipe, 2, 1},
        std::tuple{Schedule::gpipe, 3, 1}, std::tuple{Schedule::gpipe, 4, 1},
        std::tuple{Schedule::one_f_one_b, 1, 1}, std::tuple{Schedule::one_f_one_b, 2, 1},
        std::tuple{Schedule::one_f_one_b, 3, 1}, std::tuple{Schedule::one_f_one_b, 4, 1},
        std::tuple{Schedule::zb_h1, 1, 1}, std::tuple{Schedule::zb_h1, 2, 1},
        std::tuple{Schedule::zb_h1, 3, 1}, std::tuple{Schedule::zb_h1, 4, 1},
        std::tuple{Schedule::interleaved, 1, 2}, std::tuple{Schedule::interleaved, 2, 2},
        std::tuple{Schedule::interleaved, 2, 3}, std::tuple{Schedule::interleaved, 3, 2},
        std::tuple{Schedule::interleaved, 4, 2}),
    [](const auto& info) {
      std::string n(schedule_name(std::get<0>(info.param)));
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n + "_p" + std::to_string(std::get<1>(info.param)) + "_v" +
             std::to_string(std::get<2>(info.param));
    });

// 1F1B, ZB-H1 and interleaved (v = 2) add each layer's micro-batch gradients in the same order
// (micro-batch 0 first), so their steps give the same bits; ZB-H1's B and W are the backward
// split in two, and interleaving moves the same layers' work between stages.
TEST(PipelineSchedulesAgree, OneFOneBZeroBubbleAndInterleavedGiveTheSameBits) {
  concurdl::kernels::set_compute_threads(1);
  const std::vector<float> x = values(kRows * kSpec.widths.front(), 9);
  std::vector<std::uint8_t> labels(kRows);
  for (std::size_t i = 0; i < kRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 5) % 5);
  for (const int stages : {2, 4})
    for (const std::size_t m : {4, 8}) {
      std::vector<std::vector<float>> grads;
      for (const auto& row : {std::pair{Schedule::one_f_one_b, 1}, std::pair{Schedule::zb_h1, 1},
                              std::pair{Schedule::interleaved, 2}}) {
        // Not a structured binding: clang 14 cannot capture one in a lambda.
        const Schedule schedule = row.first;
        const int chunks = row.second;
        const std::vector<std::size_t> bounds =
            stage_boundaries(kSpec.widths.size() - 1, stages * chunks);
        std::vector<float> all(nn::Mlp(kSpec, 5).parameters().size());
        within_seconds(kDeadline, [&] {
          dp::run_threads(stages, [&](dp::Communicator& comm) {
            nn::Mlp model(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj);
            PipelineWorkspace ws;
            for (int step = 0; step < 2; ++step)
              pipeline_step(comm, model, bounds, x.data(), labels.data(), kRows, m, schedule, &ws);
            const auto& off = model.layer_offsets();
            for (int c = 0; c < chunks; ++c) {
              const auto piece = static_cast<std::size_t>(c * stages + comm.rank());
              for (std::size_t i = off[bounds[piece]]; i < off[bounds[piece + 1]]; ++i)
                all[i] = model.gradients()[i];
            }
          });
        });
        grads.push_back(all);
      }
      EXPECT_TRUE(grads[0] == grads[1]) << "zb-h1 p=" << stages << " m=" << m;
      EXPECT_TRUE(grads[0] == grads[2]) << "interleaved p=" << stages << " m=" << m;
    }
}

// The idealised timeline of every schedule's orders: no deadlock, and the bubble of its row's
// formula (interleaved for m a multiple of p; ZB-H1 for every m, both regimes).
TEST(PipelineTimeline, EveryOrderGivesItsBubbleFormula) {
  for (const ScheduleRow& row : kSchedules)
    for (const int stages : {1, 2, 3, 4, 6})
      for (const int chunks : {1, 2, 3})
        for (std::size_t m = 1; m <= 16; ++m) {
          if (chunks > 1 && row.schedule != Schedule::interleaved) continue;
          std::vector<std::vector<PipeOp>> orders;
          for (int s = 0; s < stages; ++s)
            orders.push_back(stage_order(row.schedule, s, stages, m, chunks));
          const ScheduleTimeline t = schedule_timeline(orders, chunks);
          SCOPED_TRACE(std::string(row.name) + " p=" + std::to_string(stages) +
                       " v=" + std::to_string(chunks) + " m=" + std::to_string(m));
          ASSERT_FALSE(t.deadlocked);
          if (row.schedule == Schedule::interleaved && m % static_cast<std::size_t>(stages) != 0)
            continue;  // every forward first: not the formula's order
          const double want = row.bubble(stages, static_cast<double>(m), chunks);
          // Interleaving at v = 1 is 1F1B; its formula is then 1F1B's.
          EXPECT_NEAR(t.bubble, want, 1e-12);
        }
}

// A schedule the orders cannot meet: stage 0 waits for B0 before it sends F1, while stage 1
// waits for F1 before its B0 (GPipe's order on the last stage): the timeline says deadlocked.
TEST(PipelineTimeline, OrdersThatCannotMeetDeadlock) {
  const std::vector<std::vector<PipeOp>> orders = {ops_from_codes(std::vector<int>{1, -1, 2, -2}),
                                                   ops_from_codes(std::vector<int>{1, 2, -2, -1})};
  EXPECT_TRUE(schedule_timeline(orders).deadlocked);
}

// Activation recomputation: two steps of every schedule (the workspace kept, as a trainer keeps
// it) give the gradients and loss of the same steps without it, bit for bit, and the same count
// of micro-batches in flight; a stage then holds the bytes its order's model says, never more
// than without, and fewer wherever more than one micro-batch waits for its B.
TEST(PipelineRecompute, SameBitsFewerBytes) {
  concurdl::kernels::set_compute_threads(1);
  constexpr std::size_t kEvenRows = 24;  // divides by every m below: micro-batches of one size
  const std::vector<float> x = values(kEvenRows * kSpec.widths.front(), 11);
  std::vector<std::uint8_t> labels(kEvenRows);
  for (std::size_t i = 0; i < kEvenRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 7) % 5);
  for (const std::size_t rows : {kRows, kEvenRows})
    for (const auto& row : {std::pair{Schedule::naive, 1}, std::pair{Schedule::gpipe, 1},
                            std::pair{Schedule::one_f_one_b, 1}, std::pair{Schedule::zb_h1, 1},
                            std::pair{Schedule::interleaved, 2}})
      for (const int stages : {1, 2, 3, 4})
        for (const std::size_t m : {1, 3, 4, 8}) {
          // Not a structured binding: clang 14 cannot capture one in a lambda.
          const Schedule schedule = row.first;
          const int chunks = row.second;
          SCOPED_TRACE(std::string(schedule_name(schedule)) + " p=" + std::to_string(stages) +
                       " m=" + std::to_string(m) + " rows=" + std::to_string(rows));
          const std::vector<std::size_t> bounds =
              stage_boundaries(kSpec.widths.size() - 1, stages * chunks);
          struct Got {
            std::vector<float> grads;
            double loss = 0;
            std::size_t peak = 0, bytes = 0;
          };
          std::vector<Got> got[2];
          for (const bool recompute : {false, true}) {
            std::vector<Got>& g = got[recompute ? 1 : 0];
            g.resize(static_cast<std::size_t>(stages));
            within_seconds(kDeadline, [&] {
              dp::run_threads(stages, [&](dp::Communicator& comm) {
                nn::Mlp model(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj);
                PipelineWorkspace ws;
                PipelineStepResult r;
                for (int step = 0; step < 2; ++step)
                  r = pipeline_step(comm, model, bounds, x.data(), labels.data(), rows, m, schedule,
                                    &ws, {.recompute = recompute});
                Got& mine = g[static_cast<std::size_t>(comm.rank())];
                mine.grads.assign(model.gradients().begin(), model.gradients().end());
                mine.loss = r.loss_sum;
                mine.peak = r.peak_activations;
                mine.bytes = r.peak_activation_bytes;
              });
            });
          }
          for (int s = 0; s < stages; ++s) {
            const Got &plain = got[0][static_cast<std::size_t>(s)],
                      &re = got[1][static_cast<std::size_t>(s)];
            EXPECT_TRUE(plain.grads == re.grads) << "stage " << s << ": other gradients";
            EXPECT_EQ(plain.loss, re.loss) << "stage " << s;
            EXPECT_EQ(plain.peak, re.peak) << "stage " << s;
            EXPECT_GT(plain.bytes, 0u) << "stage " << s;
            EXPECT_LE(re.bytes, plain.bytes) << "stage " << s;
            // Micro-batches of one size (m divides the rows): the bytes are the model's exactly.
            if (rows % m == 0) {
              const std::vector<PipeOp> order = stage_order(schedule, s, stages, m, chunks);
              EXPECT_EQ(
                  plain.bytes,
                  activation_model(kSpec, bounds, s, stages, order, rows / m, false).peak_bytes)
                  << "stage " << s;
              EXPECT_EQ(
                  re.bytes,
                  activation_model(kSpec, bounds, s, stages, order, rows / m, true).peak_bytes)
                  << "stage " << s;
            }
            // Fewer wherever more than one is in flight, except under ZB-H1, whose peak may be
            // all micro-batches that wait for their W: recomputed already, they save nothing.
            if (plain.peak > 1 && schedule != Schedule::zb_h1) {
              EXPECT_LT(re.bytes, plain.bytes) << "stage " << s;
            }
            if (schedule == Schedule::zb_h1 && s == 0 && plain.peak > 1 && stages > 1) {
              EXPECT_LT(re.bytes, plain.bytes) << "stage " << s;
            }
          }
        }
}

std::string names(const std::vector<PipeOp>& order) {
  std::string out;
  for (const PipeOp& op : order) {
    if (!out.empty()) out += ' ';
    out += op_name(op);
  }
  return out;
}

TEST(PipelineOrder, OneFOneBWarmsUpThenAlternates) {
  // Stage 0 of 2 with 4 micro-batches: F0, then (F1 B0) (F2 B1) (F3 B2), then B3.
  EXPECT_EQ(codes_of(stage_order(Schedule::one_f_one_b, 0, 2, 4)),
            (std::vector<int>{1, 2, -1, 3, -2, 4, -3, -4}));
  // The last stage never warms up: F B F B ...
  EXPECT_EQ(codes_of(stage_order(Schedule::one_f_one_b, 1, 2, 3)),
            (std::vector<int>{1, -1, 2, -2, 3, -3}));
  EXPECT_EQ(codes_of(stage_order(Schedule::gpipe, 0, 2, 3)),
            (std::vector<int>{1, 2, 3, -3, -2, -1}));
}

TEST(PipelineOrder, ZeroBubbleDefersStageSWeightGradientsByS) {
  // The last of 2 stages: 1F1B with each W right after its B.
  EXPECT_EQ(names(stage_order(Schedule::zb_h1, 1, 2, 3)), "F0 B0 F1 B1 W0 F2 B2 W1 W2");
  // Stage 0: no deferral (and the warm-up forward of 1F1B).
  EXPECT_EQ(names(stage_order(Schedule::zb_h1, 0, 2, 3)), "F0 F1 B0 W0 F2 B1 W1 B2 W2");
}

TEST(PipelineOrder, InterleavedRunsGroupsOfPThroughEachChunk) {
  // p = 2, v = 2, m = 2: stage 0 warms up 2(p - 1) + (v - 1) p = 4 forwards (all of them).
  EXPECT_EQ(names(stage_order(Schedule::interleaved, 0, 2, 2, 2)),
            "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1");
  EXPECT_EQ(names(stage_order(Schedule::interleaved, 1, 2, 2, 2)),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 B0 B1");
  // m = 3 is no multiple of p = 2: every forward first, groups of 2 and of 1.
  EXPECT_EQ(names(stage_order(Schedule::interleaved, 0, 2, 3, 2)),
            "F0 F1 F0.1 F1.1 F2 F2.1 B0.1 B1.1 B0 B1 B2.1 B2");
  EXPECT_THROW(stage_order(Schedule::one_f_one_b, 0, 2, 4, 2), std::invalid_argument);
}

TEST(PipelineOrder, BadOrdersAreRefusedByName) {
  const auto refused = [](const std::vector<PipeOp>& o, std::size_t m, int v, const char* what) {
    try {
      check_order(o, m, v);
      ADD_FAILURE() << "accepted: " << names(o);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  using K = OpKind;
  refused({{K::backward, 0, 0}, {K::forward, 0, 0}}, 1, 1, "B0 before its F");
  refused({{K::forward, 0, 0}, {K::weight, 0, 0}, {K::backward, 0, 0}}, 1, 1, "W0 before its B");
  refused({{K::forward, 0, 0}, {K::backward, 0, 0}, {K::weight, 0, 0}, {K::weight, 0, 0}}, 1, 1,
          "W0 again");
  refused({{K::forward, 0, 1}, {K::backward, 0, 1}}, 1, 1, "chunk 0..0");
  refused({{K::forward, 0, 0}}, 1, 1, "B0 never runs");
  check_order(std::vector<PipeOp>{{K::forward, 0, 0}, {K::backward, 0, 0}, {K::weight, 0, 0}}, 1);
  EXPECT_THROW(ops_from_codes(std::vector<int>{1, 0}), std::invalid_argument);
  EXPECT_THROW(codes_of(std::vector<PipeOp>{{K::weight, 0, 0}}), std::invalid_argument);
}

TEST(PipelineShapes, BadStageAndMicroBatchCountsAreRefused) {
  EXPECT_EQ(stage_boundaries(7, 3), (std::vector<std::size_t>{0, 3, 5, 7}));
  EXPECT_THROW(stage_boundaries(2, 3), std::invalid_argument);
  EXPECT_THROW(stage_boundaries(2, 0), std::invalid_argument);
}

}  // namespace

// --- memory, measured ---------------------------------------------------------------------------

namespace memory_tests {

struct StageMemory {
  PipelineStepResult step;
  concurdl::MemoryBytes after;               // the stage's account after the step
  std::uint64_t allocations = 0, frees = 0;  // the stage's account's, over the step
};

// One step of `schedule` at p stages, m micro-batches of `rows / m` rows, every stage's buffers
// counted in an account of its own (the model's too).
std::vector<StageMemory> measure(Schedule schedule, int stages, std::size_t m, std::size_t rows,
                                 const StepOptions& base, int chunks = 1) {
  const std::vector<float> x = values(rows * kSpec.widths.front(), 3);
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>((i * 7) % 5);
  const std::vector<std::size_t> bounds =
      stage_boundaries(kSpec.widths.size() - 1, stages * chunks);
  std::vector<StageMemory> out(static_cast<std::size_t>(stages));
  within_seconds(kDeadline, [&] {
    dp::run_threads(stages, [&](dp::Communicator& comm) {
      concurdl::MemoryAccount account;
      nn::Mlp model(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj, &account);
      const concurdl::MemoryBytes before = account.current();
      const std::uint64_t allocs = account.allocations(), frees = account.frees();
      StepOptions o = base;
      o.memory = &account;
      StageMemory& mine = out[static_cast<std::size_t>(comm.rank())];
      mine.step = pipeline_step(comm, model, bounds, x.data(), labels.data(), rows, m, schedule,
                                nullptr, o);
      // Only the model's own buffers stay: parameters and gradients, as before the step, plus
      // nothing of the step's.
      mine.after = account.current();
      mine.allocations = account.allocations() - allocs;
      mine.frees = account.frees() - frees;
      EXPECT_EQ(mine.after.bytes, before.bytes) << "stage " << comm.rank();
    });
  });
  return out;
}

// The measurement is read from the buffers: every buffer a step allocates it frees, every
// activation byte the model predicts is held at the peak, and messages are counted apart.
TEST(PipelineMemory, EveryStepBufferIsCountedAndFreed) {
  for (const Schedule schedule :
       {Schedule::gpipe, Schedule::one_f_one_b, Schedule::zb_h1, Schedule::interleaved})
    for (const bool recompute : {false, true}) {
      const int chunks = schedule == Schedule::interleaved ? 2 : 1;
      const std::size_t m = 4, rows = 16;
      const std::vector<StageMemory> got =
          measure(schedule, 2, m, rows, {.recompute = recompute}, chunks);
      const std::vector<std::size_t> bounds = stage_boundaries(kSpec.widths.size() - 1, 2 * chunks);
      for (int s = 0; s < 2; ++s) {
        SCOPED_TRACE(std::string(schedule_name(schedule)) + (recompute ? " recompute" : "") +
                     " stage " + std::to_string(s));
        const StageMemory& g = got[static_cast<std::size_t>(s)];
        EXPECT_GT(g.allocations, 0u);
        EXPECT_EQ(g.allocations, g.frees);
        const std::vector<PipeOp> order = stage_order(schedule, s, 2, m, chunks);
        EXPECT_EQ(g.step.peak_activation_bytes,
                  activation_model(kSpec, bounds, s, 2, order, rows / m, recompute).peak_bytes);
        EXPECT_EQ(g.step.peak_memory[concurdl::MemoryKind::activations],
                  g.step.peak_activation_bytes);
        EXPECT_GT(g.step.peak_memory[concurdl::MemoryKind::communication], 0u);
        EXPECT_GE(g.step.peak_bytes, g.step.peak_activation_bytes);
      }
    }
}

// The control: a stage that keeps every micro-batch's buffers to the step's end (one slot per
// micro-batch, reused, as the workspace once did) is measured holding more than the model says,
// and 1F1B then holds what GPipe holds. Were the measurement the model run again, it could not
// tell them apart.
TEST(PipelineMemory, AStageThatKeepsWhatItShouldFreeIsMeasuredHoldingMore) {
  const std::size_t m = 8, rows = 16;
  const std::vector<StageMemory> gpipe = measure(Schedule::gpipe, 2, m, rows, {});
  const std::vector<StageMemory> ofob = measure(Schedule::one_f_one_b, 2, m, rows, {});
  const std::vector<StageMemory> leaky =
      measure(Schedule::one_f_one_b, 2, m, rows, {.keep_buffers = true});
  const std::vector<std::size_t> bounds = stage_boundaries(kSpec.widths.size() - 1, 2);
  for (int s = 0; s < 2; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const auto su = static_cast<std::size_t>(s);
    const std::size_t model =
        activation_model(kSpec, bounds, s, 2, stage_order(Schedule::one_f_one_b, s, 2, m), rows / m,
                         false)
            .peak_bytes;
    std::printf("stage %d, activations' peak: 1F1B %zu B (model %zu), leaky 1F1B %zu, GPipe %zu\n",
                s, ofob[su].step.peak_activation_bytes, model, leaky[su].step.peak_activation_bytes,
                gpipe[su].step.peak_activation_bytes);
    EXPECT_EQ(ofob[su].step.peak_activation_bytes, model);
    EXPECT_GT(leaky[su].step.peak_activation_bytes, model);
    EXPECT_GE(leaky[su].step.peak_activation_bytes, gpipe[su].step.peak_activation_bytes);
    EXPECT_GT(gpipe[su].step.peak_activation_bytes, ofob[su].step.peak_activation_bytes);
    EXPECT_GT(leaky[su].step.peak_bytes, ofob[su].step.peak_bytes);
    EXPECT_EQ(leaky[su].allocations, leaky[su].frees);  // freed at the step's end all the same
  }
}

}  // namespace memory_tests
