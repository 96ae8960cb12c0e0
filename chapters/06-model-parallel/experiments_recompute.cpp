// Chapter 06's activation-recomputation experiment:
//   ch06/recompute  the pipeline step of ch06/pipeline (experiments_pipeline.cpp) at p = 2 and 4
//                   with and without activation recomputation (GPipe, 1F1B): the bytes a stage
//                   keeps for backward against activation_model, and what the extra
//                   forwards cost in step time
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/nn/mlp.hpp"
#include "experiments_common.hpp"

namespace concurdl::mp {

namespace {

// The model's bytes for the busiest stage, with or without recomputation.
Model bytes_curve(int p, const std::string& schedule, bool recompute) {
  return detail::bytes_curve(p, schedule, 1, recompute,
                             fmt::format("{}{}: model", schedule, recompute ? ", recomputed" : ""),
                             fmt::format("recompute={}", recompute ? "on" : "off"));
}

// GPipe and 1F1B (the schedules that keep one chunk a stage and run every backward whole), then
// the sweep the schedules experiment makes.
std::vector<Axis> recompute_axes() {
  std::vector<Axis> axes = {
      kSchedules.axis("ch06/recompute", {.where =
                                             [](const ScheduleRow& r) {
                                               return r.schedule == Schedule::gpipe ||
                                                      r.schedule == Schedule::one_f_one_b;
                                             },
                                         .all_quick = true})};
  for (Axis& a : detail::pipeline_sweep_axes()) axes.push_back(std::move(a));
  return axes;
}

const bool registered_recompute = register_experiment({
    .id = "ch06/recompute",
    .chapter = "06-model-parallel",
    .title = "Activation recomputation in the pipeline: bytes a stage keeps for backward, against "
             "their model, and the step time, with and without it",
    .axes = recompute_axes(),
    .baseline = {{"recompute", "off"}},
    .metric = "time",
    .unit = "s",
    .lower_is_better = true,
    .metrics = detail::pipeline_metrics(),
    .scaling_axis = "stages",
    .interleave = {"recompute", "schedule"},
    .repetitions = 5,
    .warmup = 1,
    .prepare = detail::pipeline_trial,
    .figures = {{.id = "bytes_gpipe_p2",
                 .title = "Bytes the busiest stage keeps for backward, GPipe, 2 stages; dashed: "
                          "the model",
                 .x = "micro_batches",
                 .y = "peak_activation_bytes",
                 .series = "recompute",
                 .where = {{"schedule", "gpipe"}, {"stages", "2"}},
                 .log_x = true,
                 .y_label = "bytes kept for backward (busiest stage)",
                 .x_label = "micro-batches m (log)",
                 .models = {bytes_curve(2, "gpipe", false), bytes_curve(2, "gpipe", true)}},
                {.id = "bytes_1f1b_p2",
                 .title = "Bytes the busiest stage keeps for backward, 1F1B, 2 stages; dashed: "
                          "the model",
                 .x = "micro_batches",
                 .y = "peak_activation_bytes",
                 .series = "recompute",
                 .where = {{"schedule", "1f1b"}, {"stages", "2"}},
                 .log_x = true,
                 .y_label = "bytes kept for backward (busiest stage)",
                 .x_label = "micro-batches m (log)",
                 .models = {bytes_curve(2, "1f1b", false), bytes_curve(2, "1f1b", true)}},
                {.id = "step_time_p2",
                 .title = "Step time, 1F1B, 2 stages, with and without recomputation",
                 .x = "micro_batches",
                 .y = "median",
                 .series = "recompute",
                 .where = {{"schedule", "1f1b"}, {"stages", "2"}},
                 .log_x = true,
                 .y_label = "time per training step (s)",
                 .x_label = "micro-batches m (log)"}},
    .claims = {{.id = "recompute_gpipe_bytes",
                // Law: the bytes are counted, and the model is exact for micro-batches of one size
                // (512 rows / 16). The busiest stage is the second: 16 inputs + 8 layers' outputs
                // against 16 x (8 outputs + 1 input) rows of 256 floats: 24/144 = 1/6.
                .statement = "With 2 stages and 16 micro-batches, recomputing the activations "
                             "cuts the bytes GPipe's busiest stage keeps for backward to a sixth "
                             "(its bytes with recomputation over without)",
                .select = {{"schedule", "gpipe"},
                           {"recompute", "on"},
                           {"stages", "2"},
                           {"micro_batches", "16"}},
                .field = "peak_activation_bytes",
                .versus = {{"recompute", "off"}},
                .compare = Claim::Compare::within,
                .bound = 1.0 / 6,
                .tolerance = 1e-4,
                .unit = "×",
                .timing = false},
               {.id = "recompute_costs_a_forward",
                // Magnitude: one more forward per micro-batch is about a third more compute (a
                // forward is one GEMM of three per layer); what the step pays also depends on
                // the bubble it falls into.
                .statement = "With 2 stages and 8 micro-batches, 1F1B's samples/s with "
                             "recomputation over without (what the extra forwards cost)",
                .select = {{"schedule", "1f1b"},
                           {"recompute", "on"},
                           {"stages", "2"},
                           {"micro_batches", "8"}},
                .field = "items_per_s",
                .versus = {{"recompute", "off"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt},
                .unit = "×",
                .min_cpus = 2}},
});

}  // namespace

}  // namespace concurdl::mp
