// What chapter 06's pipeline experiments share (experiments_common.hpp): their metrics, the
// model's axes and the sweep the schedules and recomputation experiments make, the chunks
// parameter, and the bubble model as a derived metric and as a curve.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "experiments_common.hpp"

namespace concurdl::mp {

namespace {

using detail::kMaxRows;
using detail::kMaxWidth;

double bubble_model(const std::string& schedule, double p, double m, double v = 1) {
  return kSchedules.find(schedule).bubble(p, m, v);
}

}  // namespace

namespace detail {

const std::vector<Metric>& pipeline_metrics() {
  static const std::vector<Metric> metrics = {
      {"bubble_fraction", "", true,
       "1 - (the stages' compute time) / (stages x the step's time): the share of the stages' "
       "time spent waiting for a neighbour or moving messages"},
      {"stage_busy_s", "s", true, "a stage's compute time in a step (forwards, backwards, loss)"},
      {"peak_activations", "", true,
       "the most micro-batches whose activations one stage held at once (the largest stage's)"},
      {"peak_activation_bytes", "B", false,
       "the most bytes one stage kept for backward at once: layer outputs of the micro-batches in "
       "flight and the inputs received for them (the largest stage's)"},
      {"activation_model_bytes", "B", false,
       "activation_model's peak bytes: the schedule's order walked op by op, each micro-batch in "
       "flight holding its input and outputs (with recomputation its input, the outputs only "
       "from its B), and its output gradients from a split B to its W (the largest stage's)"}};
  return metrics;
}

const std::vector<Axis>& pipeline_model_axes() {
  static const std::vector<Axis> axes = {
      {.name = "width",
       .values = {"256"},
       .kind = AxisKind::size,
       .max = kMaxWidth,
       .smoke = {"32"}},
      {.name = "layers", .values = {"16"}, .kind = AxisKind::count, .max = kMaxStages},
      {.name = "rows",
       .values = {"512"},
       .kind = AxisKind::count,
       .max = kMaxRows,
       .smoke = {"32"}}};
  return axes;
}

std::vector<Axis> pipeline_sweep_axes() {
  std::vector<Axis> axes = {{.name = "recompute", .values = {"off", "on"}},
                            {.name = "stages",
                             .values = {"2", "4"},
                             .quick = {"2"},
                             .kind = AxisKind::count,
                             .max = kMaxStages,
                             .smoke = {"2"}},
                            {.name = "micro_batches",
                             .values = {"4", "8", "16"},
                             .quick = {"4", "16"},
                             .kind = AxisKind::count,
                             .max = kMaxRows,
                             .smoke = {"4"}}};
  for (const Axis& a : pipeline_model_axes()) axes.push_back(a);
  return axes;
}

int chunks_of(const Params& p) {
  return p.count("chunks") != 0 ? static_cast<int>(param_int(p, "chunks")) : 1;
}

void derive_bubble(const Params& p, const Work&, Record& r) {
  const double model =
      bubble_model(param_str(p, "schedule"), static_cast<double>(param_int(p, "stages")),
                   static_cast<double>(param_int(p, "micro_batches")), chunks_of(p));
  r.derived["bubble_model"] = model;
  if (const auto it = r.metrics.find("bubble_fraction"); it != r.metrics.end())
    r.derived["bubble_error"] = std::fabs(it->second.stats.median - model);
}

Model bytes_curve(int p, const std::string& schedule, int v, bool recompute,
                  const std::string& label, const std::string& series) {
  return {.label = label,
          .series = series,
          .y = [p, schedule, v, recompute](const ModelPoint& pt) -> std::optional<double> {
            const auto m = static_cast<std::size_t>(pt.x);
            if (m < 1 || (v > 1 && m % static_cast<std::size_t>(p) != 0)) return std::nullopt;
            nn::MlpSpec spec;
            spec.widths.assign(17, 256);
            const std::vector<std::size_t> bounds = stage_boundaries(16, p * v);
            const Schedule sched = kSchedules.find(schedule).schedule;
            std::size_t most = 0;
            for (int s = 0; s < p; ++s)
              most = std::max(
                  most, activation_model(spec, bounds, s, p, stage_order(sched, s, p, m, v),
                                         dp::block_of(512, static_cast<int>(m), 0).count, recompute)
                            .peak_bytes);
            return static_cast<double>(most);
          }};
}

Model bubble_curve(int p, const std::string& schedule, const std::string& label, int v) {
  return {.label = label,
          .series = schedule,
          .y = [p, schedule, v](const ModelPoint& pt) -> std::optional<double> {
            return bubble_model(schedule, p, pt.x, v);
          }};
}
}  // namespace detail

}  // namespace concurdl::mp
