// `concurdl train --pipeline P`: the pipeline as one of the train command's training modes
// (kernels/nn/distributed_train.hpp), registered with the program.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "concurdl/core/errors.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/mp/three_d_trainer.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::mp {

namespace {

// The pipeline's options from `concurdl train`'s, or a UsageError naming the one it cannot run.
PipelineOptions pipeline_options(const nn::DistributedOptions& o, const nn::TrainConfig& c) {
  if (o.backend != "threads")
    throw UsageError(fmt::format(
        "--pipeline: runs its stages as threads of this process (--backend threads), not "
        "--backend {}",
        o.backend));
  const std::size_t layers = c.spec.widths.size() - 1;
  if (o.ranks > kMaxStages || static_cast<std::size_t>(o.ranks) > layers)
    throw UsageError(fmt::format(
        "--pipeline {}: the model {} has {} layers; a stage needs one at least (at most {} "
        "stages)",
        o.ranks, c.spec.describe(), layers, kMaxStages));
  PipelineOptions p;
  p.stages = o.ranks;
  p.micro_batches = o.micro_batches > 0 ? o.micro_batches : 4;
  if (p.micro_batches > c.batch)
    throw UsageError(
        fmt::format("--micro-batches {}: more than the batch's {} rows", p.micro_batches, c.batch));
  const std::string sched = o.schedule.empty() ? "1f1b" : o.schedule;
  const auto parsed = parse_schedule(sched);
  if (!parsed)
    throw UsageError(fmt::format("--schedule: unknown schedule '{}' (known: {})", sched,
                                 fmt::join(kSchedules.names(Offer::all), ", ")));
  p.schedule = *parsed;
  p.recompute = o.recompute;
  if (o.chunks > 0 && p.schedule != Schedule::interleaved)
    throw UsageError(fmt::format("--chunks {}: only with --schedule interleaved (not {})", o.chunks,
                                 schedule_name(p.schedule)));
  p.chunks = p.schedule == Schedule::interleaved ? (o.chunks > 0 ? o.chunks : 2) : 1;
  if (static_cast<std::size_t>(o.ranks * p.chunks) > layers)
    throw UsageError(
        fmt::format("--chunks {}: {} stages x {} chunks is more pieces than the {} layers of {}",
                    p.chunks, o.ranks, p.chunks, layers, c.spec.describe()));
  if (p.schedule == Schedule::interleaved &&
      p.micro_batches % static_cast<std::size_t>(o.ranks) != 0)
    throw UsageError(
        fmt::format("--schedule interleaved: --micro-batches {} is not a multiple of the {} stages "
                    "(micro-batches go through the chunks in groups of P)",
                    p.micro_batches, o.ranks));
  return p;
}

// The grid's options from `concurdl train`'s, or a UsageError naming the one it cannot run.
ThreeDOptions three_d_options(const nn::DistributedOptions& o, const nn::TrainConfig& c) {
  if (o.backend != "threads")
    throw UsageError(fmt::format(
        "--dp/--tp/--pp: runs the grid as threads of this process (--backend threads), not "
        "--backend {}",
        o.backend));
  ThreeDOptions t;
  t.grid = {o.dp, o.tp, o.pp};
  const std::size_t layers = c.spec.widths.size() - 1;
  if (static_cast<std::size_t>(o.pp) > layers)
    throw UsageError(fmt::format("--pp {}: the model {} has {} layers; a stage needs one at least",
                                 o.pp, c.spec.describe(), layers));
  // Each stage's pairs split their hidden width over the tensor ranks.
  if (o.tp > 1) {
    const std::vector<std::size_t> bounds = stage_boundaries(layers, o.pp);
    for (std::size_t s = 0; s + 1 < bounds.size(); ++s)
      for (std::size_t l = bounds[s]; l + 1 < bounds[s + 1]; l += 2)
        if (c.spec.widths[l + 1] % static_cast<std::size_t>(o.tp) != 0)
          throw UsageError(fmt::format(
              "--tp {}: layer {}'s {} outputs (a column-parallel layer of stage {}) do not divide "
              "over {} tensor ranks",
              o.tp, l, c.spec.widths[l + 1], s, o.tp));
  }
  t.micro_batches = o.micro_batches > 0 ? o.micro_batches : 4;
  if (t.micro_batches > c.batch)
    throw UsageError(
        fmt::format("--micro-batches {}: more than the batch's {} rows", t.micro_batches, c.batch));
  const std::string sched = o.schedule.empty() ? "1f1b" : o.schedule;
  const auto parsed = parse_schedule(sched);
  if (!parsed || schedule_row(*parsed).three_d == InThreeD::not_offered)
    throw UsageError(
        fmt::format("--schedule {}: the 3D grid's pipelines run naive, gpipe or 1f1b", sched));
  t.schedule = *parsed;
  return t;
}

const bool registered_3d = nn::register_training_mode(
    {.name = "3d",
     .what = "3D parallelism (chapter 06): --dp D data-parallel replicas of --pp P pipeline "
             "stages of --tp T tensor-parallel ranks, D x T x P threads; --micro-batches M, "
             "--schedule naive|gpipe|1f1b",
     .check = [](const nn::DistributedOptions& o,
                 const nn::TrainConfig& c) { (void)three_d_options(o, c); },
     .run =
         [](const nn::DistributedOptions& o, const nn::TrainConfig& c, const nn::Dataset& train,
            const nn::RankLoop& loop) {
           ThreeDTrainer t(c, train, three_d_options(o, c));
           loop(t);
         }});

const bool registered = nn::register_training_mode(
    {.name = "pipeline",
     .what = "pipeline parallelism (chapter 06): the layers cut into --pipeline P stages, "
             "--micro-batches M, --schedule naive|gpipe|1f1b|interleaved|zb-h1, --chunks v, "
             "--recompute",
     .check = [](const nn::DistributedOptions& o,
                 const nn::TrainConfig& c) { (void)pipeline_options(o, c); },
     .run =
         [](const nn::DistributedOptions& o, const nn::TrainConfig& c, const nn::Dataset& train,
            const nn::RankLoop& loop) {
           PipelineTrainer t(c, train, pipeline_options(o, c));
           loop(t);
         }});

}  // namespace

}  // namespace concurdl::mp
