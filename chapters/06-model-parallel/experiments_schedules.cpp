// Chapter 06's schedules experiment:
//   ch06/schedules  the pipeline step of ch06/pipeline (experiments_pipeline.cpp) under GPipe,
//                   1F1B, interleaved 1F1B (v = 2 chunks a stage) and ZB-H1, at p = 2 and 4,
//                   m = 4, 8, 16 (multiples of p: interleaved's groups), with and without
//                   activation recomputation: each schedule's bubble against its formula, the
//                   bytes its busiest stage keeps against its order's model, and the step time
//   exercise 6.2    one pipeline step of a 256-512-512-512-10 MLP on 2 stages, 256 rows in 8
//                   micro-batches: the student's 1F1B order (student_1f1b_order) against
//                   stage_order's
//   exercise 6.3    the same step: the student's ZB-H1 order (student_zb_h1_order) against
//                   stage_order's
// An exercise's trial checks every stage's gradients against one process's forward and backward
// of the unsplit model.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/nn/mlp.hpp"
#include "exercise_timings.hpp"
#include "exercises/student_1f1b.hpp"
#include "exercises/student_zb_h1.hpp"
#include "experiments_common.hpp"

namespace concurdl::mp {

namespace {

using detail::bubble_curve;
using detail::first_difference;
using detail::kPoison;

bool has_chunks(const ScheduleRow& r) { return r.chunking == Chunking::v_chunks; }

Model bytes_curve(int p, const std::string& schedule, int v, bool recompute) {
  return detail::bytes_curve(p, schedule, v, recompute, fmt::format("{}: model", schedule),
                             schedule);
}

std::vector<Model> bubble_models(int p) {
  return {bubble_curve(p, "1f1b", "GPipe and 1F1B: (p-1)/(m+p-1)"),
          bubble_curve(p, "interleaved", "interleaved, v = 2: (p-1)/(2m+p-1)", 2),
          bubble_curve(p, "zb-h1", "ZB-H1: (p-1)/(3m+p-1)")};
}

std::vector<Model> bytes_models(int p, bool recompute) {
  return {bytes_curve(p, "gpipe", 1, recompute), bytes_curve(p, "1f1b", 1, recompute),
          bytes_curve(p, "interleaved", 2, recompute), bytes_curve(p, "zb-h1", 1, recompute)};
}

// Every schedule but naive, interleaved's chunks, then the sweep the recomputation experiment
// makes too.
std::vector<Axis> schedules_axes() {
  std::vector<Axis> axes = {
      kSchedules.axis("ch06/schedules",
                      {.where = [](const ScheduleRow& r) { return r.schedule != Schedule::naive; },
                       .all_quick = true}),
      {.name = "chunks", .values = {"2"}, .kind = AxisKind::count, .max = kMaxStages}};
  for (Axis& a : detail::pipeline_sweep_axes()) axes.push_back(std::move(a));
  return axes;
}

const bool registered_schedules = register_experiment({
    .id = "ch06/schedules",
    .chapter = "06-model-parallel",
    .title = "Pipeline schedules: GPipe, 1F1B, interleaved 1F1B and ZB-H1 on one training step: "
             "bubble, bytes kept for backward and step time, with and without recomputation",
    .axes = schedules_axes(),
    .baseline = {{"schedule", "1f1b"}},
    .metric = "time",
    .unit = "s",
    .lower_is_better = true,
    .metrics = detail::pipeline_metrics(),
    .derive = detail::derive_bubble,
    .scaling_axis = "stages",
    .inapplicable =
        kSchedules.inapplicable([](const ScheduleRow& r) { return !has_chunks(r); }, {"chunks"}),
    .interleave = {"schedule", "recompute"},
    .repetitions = 5,
    .warmup = 1,
    .prepare = detail::pipeline_trial,
    .figures = {{.id = "bubble_p2",
                 .title = "Bubble fraction by schedule, 2 stages; dashed: each schedule's model",
                 .x = "micro_batches",
                 .y = "bubble_fraction",
                 .series = "schedule",
                 .where = {{"stages", "2"}, {"recompute", "off"}},
                 .log_x = true,
                 .y_label = "bubble fraction (measured)",
                 .x_label = "micro-batches m (log)",
                 .models = bubble_models(2)},
                {.id = "bubble_p4",
                 .title = "Bubble fraction by schedule, 4 stages; dashed: each schedule's model",
                 .x = "micro_batches",
                 .y = "bubble_fraction",
                 .series = "schedule",
                 .where = {{"stages", "4"}, {"recompute", "off"}},
                 .log_x = true,
                 .y_label = "bubble fraction (measured)",
                 .x_label = "micro-batches m (log)",
                 .models = bubble_models(4)},
                {.id = "bytes_p2",
                 .title = "Bytes the busiest stage keeps for backward, 2 stages; dashed: the "
                          "orders' model",
                 .x = "micro_batches",
                 .y = "peak_activation_bytes",
                 .series = "schedule",
                 .where = {{"stages", "2"}, {"recompute", "off"}},
                 .log_x = true,
                 .y_label = "bytes kept for backward (busiest stage)",
                 .x_label = "micro-batches m (log)",
                 .models = bytes_models(2, false)},
                {.id = "bytes_recomputed_p2",
                 .title = "The same with recomputation, 2 stages; dashed: the orders' model",
                 .x = "micro_batches",
                 .y = "peak_activation_bytes",
                 .series = "schedule",
                 .where = {{"stages", "2"}, {"recompute", "on"}},
                 .log_x = true,
                 .y_label = "bytes kept for backward (busiest stage)",
                 .x_label = "micro-batches m (log)",
                 .models = bytes_models(2, true)},
                {.id = "step_time_p2",
                 .title = "Step time by schedule, 2 stages, without recomputation",
                 .x = "micro_batches",
                 .y = "median",
                 .series = "schedule",
                 .where = {{"stages", "2"}, {"recompute", "off"}},
                 .log_x = true,
                 .y_label = "time per training step (s)",
                 .x_label = "micro-batches m (log)"},
                {.id = "step_time_p4",
                 .title = "Step time by schedule, 4 stages, without recomputation",
                 .x = "micro_batches",
                 .y = "median",
                 .series = "schedule",
                 .where = {{"stages", "4"}, {"recompute", "off"}},
                 .log_x = true,
                 .y_label = "time per training step (s)",
                 .x_label = "micro-batches m (log)"}},
    .derived = {"bubble_model", "bubble_error"},
    .claims = {{.id = "zb_h1_shrinks_the_bubble",
                // Law with a tolerance. The models: 1F1B (p-1)/(m+p-1) = 0.2 and ZB-H1
                // (p-1)/(3m+p-1) = 0.077 at p = 2, m = 4, a ratio of 2.6. Both schedules send
                // the same 2m(p-1) messages; if the excess over the models is the hand-offs they
                // leave out (gpipe_bubble_p2's hypothesis, which no variant isolates), it is
                // about the same e for both: (0.2 + e) / (0.077 + e) >= 1.33 while e <= 0.30. The
                // scale of e is gpipe_bubble_p2's (0.015-0.074 in its committed runs, a quarter
                // of the allowance), so this bound is not independent of those runs; runs taken
                // after the bounds were frozen test it.
                .statement = "With 2 stages and 4 micro-batches, ZB-H1's measured bubble is at "
                             "most three quarters of 1F1B's (1F1B's over ZB-H1's at least 1.33): "
                             "the deferred W's fill it",
                .select = {{"schedule", "zb-h1"},
                           {"recompute", "off"},
                           {"stages", "2"},
                           {"micro_batches", "4"}},
                .field = "bubble_fraction",
                .versus = {{"schedule", "1f1b"}},
                .bound = 1.33,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
                .unit = "×",
                .min_cpus = 2},
               {.id = "zb_h1_keeps_more_bytes",
                // Law: the bytes are counted and activation_model is exact for micro-batches of
                // one size (512 / 8 rows). 1F1B's busiest stage (stage 0) keeps 2 micro-batches'
                // 8 layer outputs; ZB-H1's (the last stage, whose W's wait a step) keeps 2
                // micro-batches' outputs and inputs and their 8 output gradients: (2 x (8 + 1)
                // + 2 x 8) / (2 x 8) = 2.125.
                .statement = "With 2 stages and 8 micro-batches, ZB-H1's busiest stage keeps "
                             "2.125x the bytes 1F1B's does on this MLP: the micro-batches whose "
                             "W waits keep their outputs and their outputs' gradients",
                .select = {{"schedule", "zb-h1"},
                           {"recompute", "off"},
                           {"stages", "2"},
                           {"micro_batches", "8"}},
                .field = "peak_activation_bytes",
                .versus = {{"schedule", "1f1b"}},
                .compare = Claim::Compare::within,
                .bound = 2.125,
                .tolerance = 1e-3,
                .unit = "×",
                .timing = false},
               {.id = "interleaved_samples_per_s",
                // Magnitude: half the bubble for twice the messages; what that buys depends on
                // what a hand-off costs against a chunk's compute.
                .statement = "With 2 stages and 8 micro-batches, interleaved 1F1B's samples/s "
                             "(2 chunks a stage) over 1F1B's",
                .select = {{"schedule", "interleaved"},
                           {"recompute", "off"},
                           {"stages", "2"},
                           {"micro_batches", "8"}},
                .field = "items_per_s",
                .versus = {{"schedule", "1f1b"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
                .unit = "×",
                .min_cpus = 2},
               {.id = "zb_h1_samples_per_s",
                // Magnitude: the bubble the W's fill, on this machine's hand-offs.
                .statement = "With 2 stages and 8 micro-batches, ZB-H1's samples/s over 1F1B's",
                .select = {{"schedule", "zb-h1"},
                           {"recompute", "off"},
                           {"stages", "2"},
                           {"micro_batches", "8"}},
                .field = "items_per_s",
                .versus = {{"schedule", "1f1b"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
                .unit = "×",
                .min_cpus = 2}},
});

// --- exercises 6.2 and 6.3: a schedule's order of operations -----------------------------------

const nn::MlpSpec kPipeSpec{{256, 512, 512, 512, 10}};
constexpr std::uint64_t kPipeSeed = 6;

// The batch and what one process's forward and backward of it gives every parameter.
struct PipeInputs {
  std::vector<float> x, gradients;
  std::vector<std::uint8_t> labels;
};

std::shared_ptr<const PipeInputs> pipe_inputs(std::size_t rows) {
  auto in = std::make_shared<PipeInputs>();
  in->x = detail::pseudo_random(rows * kPipeSpec.widths.front(), 8);
  for (float& v : in->x) v = 0.5f * (v + 1.0f);  // [0, 1), as pixels
  in->labels.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) in->labels[i] = static_cast<std::uint8_t>((i * 7) % 10);
  nn::Mlp whole(kPipeSpec, kPipeSeed);
  whole.forward_backward(in->x.data(), in->labels.data(), rows);
  in->gradients.assign(whole.gradients().begin(), whole.gradients().end());
  return in;
}

// A stage's order of operations in an exercise: the student's function or stage_order's.
using OrderOf = std::vector<PipeOp> (*)(Impl impl, int stage, int stages, std::size_t m);
std::vector<PipeOp> one_f_one_b_order(Impl impl, int stage, int stages, std::size_t m) {
  return impl == Impl::student ? ops_from_codes(student_1f1b_order(stage, stages, m))
                               : stage_order(Schedule::one_f_one_b, stage, stages, m);
}
std::vector<PipeOp> zb_h1_order(Impl impl, int stage, int stages, std::size_t m) {
  return impl == Impl::student ? student_zb_h1_order(stage, stages, m)
                               : stage_order(Schedule::zb_h1, stage, stages, m);
}

// One pipeline step of kPipeSpec on `stages` thread ranks, every stage running the order of
// operations that the student's function (or stage_order) gives it.
Trial order_trial(OrderOf order_of, Impl impl, const Params& p, GroupCache& cache) {
  const int stages = static_cast<int>(param_int(p, "stages"));
  const auto rows = static_cast<std::size_t>(param_int(p, "rows"));
  const auto m = static_cast<std::size_t>(param_int(p, "micro_batches"));
  const std::size_t layers = kPipeSpec.widths.size() - 1;
  if (static_cast<std::size_t>(stages) > layers)
    throw UsageError(fmt::format("parameter 'stages': {} stages of a {}-layer MLP ({})", stages,
                                 layers, kPipeSpec.describe()));
  if (m > rows)
    throw UsageError(
        fmt::format("parameter 'micro_batches': {} micro-batches of {} rows", m, rows));
  const auto in = cache.get<std::shared_ptr<const PipeInputs>>("pipe_inputs",
                                                               [&] { return pipe_inputs(rows); });
  struct State {
    std::vector<std::unique_ptr<nn::Mlp>> models;  // one per stage, as every rank builds one
    std::vector<std::size_t> bounds;
  };
  auto st = std::make_shared<State>();
  st->bounds = stage_boundaries(layers, stages);
  for (int s = 0; s < stages; ++s)
    st->models.push_back(std::make_unique<nn::Mlp>(kPipeSpec, kPipeSeed));
  Trial t;
  t.reset = [st] {
    kernels::settle_runtime(kernels::ThreadRuntime::openblas);
    for (auto& model : st->models) {
      const auto g = model->gradients();
      std::fill(g.begin(), g.end(), kPoison);
    }
  };
  t.run = [st, in, order_of, impl, stages, rows, m] {
    const kernels::ComputeThreadsScope one(1);  // one compute thread per worker
    dp::run_threads(stages, [&](dp::Communicator& comm) {
      const int s = comm.rank();
      const std::vector<PipeOp> order = order_of(impl, s, stages, m);
      pipeline_step(comm, *st->models[static_cast<std::size_t>(s)], st->bounds, in->x.data(),
                    in->labels.data(), rows, m, std::span<const PipeOp>(order));
    });
  };
  t.check = [st, in]() -> std::string {
    for (std::size_t s = 0; s < st->models.size(); ++s) {
      const auto& off = st->models[s]->layer_offsets();
      const std::size_t lo = off[st->bounds[s]], hi = off[st->bounds[s + 1]];
      const std::string e =
          first_difference(st->models[s]->gradients().subspan(lo, hi - lo),
                           std::span<const float>(in->gradients).subspan(lo, hi - lo),
                           fmt::format("stage {}'s gradient (from parameter {})", s, lo));
      if (!e.empty()) return e;
    }
    return "";
  };
  // Forward and backward of every row through every layer: 6 rows x parameters FLOPs.
  std::size_t weights = 0;
  for (std::size_t l = 0; l < layers; ++l) weights += kPipeSpec.widths[l] * kPipeSpec.widths[l + 1];
  t.work = {.items = static_cast<double>(rows),
            .flops = 6.0 * static_cast<double>(rows) * static_cast<double>(weights)};
  return t;
}

// The timing of an exercise on a schedule's order: `title`, the trial with `order_of`.
Experiment order_timing(std::string title, OrderOf order_of) {
  using detail::kMaxExerciseDim;
  return exercise_timing(
      {.title = std::move(title),
       .threads_axis = "",
       .axes = {{"stages", {"2"}, {}, AxisKind::count, 4},
                {"rows", {"256"}, {}, AxisKind::count, kMaxExerciseDim, {"8"}},
                {"micro_batches", {"8"}, {}, AxisKind::count, kMaxExerciseDim, {"4"}}},
       .repetitions = detail::kExerciseTrialRepetitions,
       .prepare = [order_of](Impl impl, const Params& p, GroupCache& cache) {
         return order_trial(order_of, impl, p, cache);
       }});
}

}  // namespace

}  // namespace concurdl::mp

// The timed halves of exercises 6.2 and 6.3 (exercise_timings.hpp).
namespace concurdl::mp::exercise_timings {

Experiment one_f_one_b() {
  return order_timing(
      "pipeline step on thread ranks (256-512-512-512-10), student's order vs stage_order's 1F1B",
      &one_f_one_b_order);
}

Experiment zb_h1() {
  return order_timing(
      "pipeline step on thread ranks (256-512-512-512-10), student's order vs stage_order's ZB-H1",
      &zb_h1_order);
}

}  // namespace concurdl::mp::exercise_timings
