// Pipeline parallelism (pipeline.hpp): for every schedule, p = 1..4 stages and m = 1..16
// micro-batches, one step on thread ranks gives each stage's layers the gradients one process
// computes on the whole batch (float tolerance), and the same loss; no schedule deadlocks (a
// deadline on every test); GPipe holds all m micro-batches' activations, 1F1B at most p - s;
// recomputing the activations gives the same bits and holds fewer bytes.
//   ch06_tests --gtest_filter='Pipeline*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "concurdl/core/testing.hpp"
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
const nn::MlpSpec kSpec{{6, 10, 9, 8, 7, 8, 9, 5}};  // 7 layers

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

class PipelineSchedules
    : public ::testing::TestWithParam<std::tuple<Schedule, int>> {  // schedule, stages
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};

TEST_P(PipelineSchedules, EveryStageGetsTheWholeBatchsGradientAndNothingDeadlocks) {
  // Not a structured binding: clang 14 cannot capture one in a lambda.
  const Schedule schedule = std::get<0>(GetParam());
  const int stages = std::get<1>(GetParam());
  const std::vector<float> x = values(kRows * kSpec.widths.front(), 7);
  std::vector<std::uint8_t> labels(kRows);
  for (std::size_t i = 0; i < kRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 5);
  nn::Mlp whole(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj);
  std::size_t correct_ref = 0;
  const float loss_ref = whole.forward_backward(x.data(), labels.data(), kRows, &correct_ref);
  const std::vector<std::size_t> bounds = stage_boundaries(kSpec.widths.size() - 1, stages);
  for (std::size_t m : {1, 2, 3, 4, 8, 16}) {
    within_seconds(kDeadline, [&] {
      dp::run_threads(stages, [&](dp::Communicator& comm) {
        nn::Mlp model(kSpec, 5, concurdl::kernels::GemmVersion::v2_ikj);
        const PipelineStepResult r =
            pipeline_step(comm, model, bounds, x.data(), labels.data(), kRows, m, schedule);
        const int s = comm.rank();
        const auto& off = model.layer_offsets();
        const std::size_t lo = off[bounds[static_cast<std::size_t>(s)]];
        const std::size_t hi = off[bounds[static_cast<std::size_t>(s) + 1]];
        const auto got = model.gradients(), want = whole.gradients();
        for (std::size_t i = lo; i < hi; ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
              << schedule_name(schedule) << " p=" << stages << " m=" << m << " stage " << s
              << " gradient " << i;
        if (s == stages - 1) {
          EXPECT_NEAR(r.loss_sum / kRows, loss_ref, 1e-5);
          EXPECT_EQ(r.correct, correct_ref);
        }
        // Activations held at once: GPipe all m, 1F1B at most p - s, naive one.
        const std::size_t want_peak =
            schedule == Schedule::gpipe ? m
            : schedule == Schedule::naive
                ? 1
                : std::min<std::size_t>(m, static_cast<std::size_t>(stages - s));
        EXPECT_EQ(r.peak_activations, want_peak)
            << schedule_name(schedule) << " p=" << stages << " m=" << m << " stage " << s;
      });
    });
  }
}

INSTANTIATE_TEST_SUITE_P(All, PipelineSchedules,
                         ::testing::Combine(::testing::Values(Schedule::naive, Schedule::gpipe,
                                                              Schedule::one_f_one_b),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           std::string n(schedule_name(std::get<0>(info.param)));
                           return n + "_p" + std::to_string(std::get<1>(info.param));
                         });

// Activation recomputation: two steps of every schedule (the workspace kept, as a trainer keeps
// it) give the gradients and loss of the same steps without it, bit for bit, and the same count
// of micro-batches in flight; a stage then holds one micro-batch's activations and the inputs,
// never more bytes than without, and fewer wherever more than one micro-batch is in flight.
TEST(PipelineRecompute, SameBitsFewerBytes) {
  concurdl::kernels::set_compute_threads(1);
  constexpr std::size_t kEvenRows = 24;  // divides by every m below: micro-batches of one size
  const std::vector<float> x = values(kEvenRows * kSpec.widths.front(), 11);
  std::vector<std::uint8_t> labels(kEvenRows);
  for (std::size_t i = 0; i < kEvenRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 7) % 5);
  for (const std::size_t rows : {kRows, kEvenRows})
    for (const Schedule schedule : {Schedule::naive, Schedule::gpipe, Schedule::one_f_one_b})
      for (const int stages : {1, 2, 3, 4})
        for (const std::size_t m : {1, 3, 4, 8}) {
          SCOPED_TRACE(std::string(schedule_name(schedule)) + " p=" + std::to_string(stages) +
                       " m=" + std::to_string(m) + " rows=" + std::to_string(rows));
          const std::vector<std::size_t> bounds = stage_boundaries(kSpec.widths.size() - 1, stages);
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
              EXPECT_EQ(plain.bytes,
                        activation_bytes_model(kSpec, bounds, s, rows / m, plain.peak, false))
                  << "stage " << s;
              EXPECT_EQ(re.bytes, activation_bytes_model(kSpec, bounds, s, rows / m, re.peak, true))
                  << "stage " << s;
            }
            if (plain.peak > 1) {
              EXPECT_LT(re.bytes, plain.bytes) << "stage " << s;
            }
          }
        }
}

TEST(PipelineOrder, OneFOneBWarmsUpThenAlternates) {
  // Stage 0 of 2 with 4 micro-batches: F0, then (F1 B0) (F2 B1) (F3 B2), then B3.
  EXPECT_EQ(stage_order(Schedule::one_f_one_b, 0, 2, 4),
            (std::vector<int>{1, 2, -1, 3, -2, 4, -3, -4}));
  // The last stage never warms up: F B F B ...
  EXPECT_EQ(stage_order(Schedule::one_f_one_b, 1, 2, 3), (std::vector<int>{1, -1, 2, -2, 3, -3}));
  EXPECT_EQ(stage_order(Schedule::gpipe, 0, 2, 3), (std::vector<int>{1, 2, 3, -3, -2, -1}));
}

TEST(PipelineShapes, BadStageAndMicroBatchCountsAreRefused) {
  EXPECT_EQ(stage_boundaries(7, 3), (std::vector<std::size_t>{0, 3, 5, 7}));
  EXPECT_THROW(stage_boundaries(2, 3), std::invalid_argument);
  EXPECT_THROW(stage_boundaries(2, 0), std::invalid_argument);
}

}  // namespace
