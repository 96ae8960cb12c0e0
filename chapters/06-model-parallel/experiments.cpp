// Chapter 06's experiments:
//   ch06/pipeline         one training step of a 16-layer MLP cut into p stages (threads), m
//                         micro-batches, schedules naive / GPipe / 1F1B: the step time, the
//                         measured bubble against (p-1)/(m+p-1), the activations a stage holds
//   ch06/tensor_parallel  Megatron's MLP block (column- then row-parallel Linear) forward and
//                         backward on 1, 2, 4 thread ranks: the time, and the share of it its
//                         two all-reduces take (timed alone on the same ranks, same sizes)
// Both validate every trial (the pipeline's gradients and the block's output and input
// gradient against one process's) and project to more devices with chapter 05's α–β links,
// drawn as models.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/dp/cost_model.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/errors.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/trace.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "concurdl/nn/mlp.hpp"

namespace concurdl::mp {

namespace {

using Clock = std::chrono::steady_clock;

const bool registered_chapter = register_chapter(
    {"06-model-parallel", "Tensor and pipeline parallelism: Megatron's split layers, GPipe, 1F1B"});

constexpr std::int64_t kMaxWidth = 16384;
constexpr std::int64_t kMaxRows = 1 << 16;
constexpr int kStepsPerSample = 4;  // pipeline steps per sample, after one not counted

std::vector<float> pseudo_random(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

double bubble_model(const std::string& schedule, double p, double m) {
  if (p <= 1) return 0;
  return schedule == "naive" ? (p - 1) / p : (p - 1) / (m + p - 1);
}

// ---- ch06/pipeline ----------------------------------------------------------------------------

// What a group (one width, depth and batch) shares: the data and one process's gradients.
struct PipelineData {
  nn::MlpSpec spec;
  std::vector<float> x;
  std::vector<std::uint8_t> labels;
  std::vector<float> want;  // the whole batch's gradient on one process
};

Trial pipeline_trial(const Params& p, GroupCache& cache) {
  const std::string schedule_text = param_str(p, "schedule");
  const auto schedule = parse_schedule(schedule_text);
  if (!schedule)
    throw UsageError(
        fmt::format("parameter 'schedule': '{}' is not naive, gpipe or 1f1b", schedule_text));
  const int stages = static_cast<int>(param_int(p, "stages"));
  const auto m = static_cast<std::size_t>(param_int(p, "micro_batches"));
  const auto width = static_cast<std::size_t>(param_int(p, "width"));
  const auto layers = static_cast<std::size_t>(param_int(p, "layers"));
  const auto rows = static_cast<std::size_t>(param_int(p, "rows"));
  if (static_cast<std::size_t>(stages) > layers)
    throw UsageError(
        fmt::format("{} stages of a {}-layer model: a stage needs a layer at least "
                    "(stages <= layers)",
                    stages, layers));
  if (m > rows)
    throw UsageError(
        fmt::format("{} micro-batches of {} rows: at most one per row (micro_batches "
                    "<= rows)",
                    m, rows));
  // Every layer width x width, the last one's outputs the classes (at most 256: labels are
  // bytes), so the stages' work is as even as the layer counts allow. Above 256 the last
  // layer is narrower and the last stage has less to do: the stages are no longer balanced,
  // and the bubble grows by what the others wait for the slowest (the default is 256).
  auto data = std::shared_ptr<PipelineData>(
      &cache.get<PipelineData>(
          "data",
          [&] {
            PipelineData d;
            d.spec.widths.assign(layers + 1, width);
            d.spec.widths.back() = std::min<std::size_t>(width, 256);
            d.x = pseudo_random(rows * width, 7);
            for (std::size_t i = 0; i < rows; ++i)
              d.labels.push_back(static_cast<std::uint8_t>((i * 31) % d.spec.widths.back()));
            kernels::ComputeThreadsScope one(1);  // one compute thread per worker
            nn::Mlp whole(d.spec, 1);
            whole.forward_backward(d.x.data(), d.labels.data(), rows);
            d.want.assign(whole.gradients().begin(), whole.gradients().end());
            return d;
          }),
      [](PipelineData*) {});  // owned by the cache
  struct State {
    std::vector<std::unique_ptr<nn::Mlp>> models;
    std::vector<std::size_t> bounds;
    std::vector<PipelineWorkspace> workspaces;  // a stage's buffers, kept across steps
    // [stage][step] of the last sample.
    std::vector<std::vector<PipelineStepResult>> results;
  };
  auto st = std::make_shared<State>();
  st->bounds = stage_boundaries(layers, stages);
  for (int s = 0; s < stages; ++s) st->models.push_back(std::make_unique<nn::Mlp>(data->spec, 1));
  st->results.assign(static_cast<std::size_t>(stages), {});
  st->workspaces.resize(static_cast<std::size_t>(stages));

  Trial t;
  t.measure = [st, data, stages, m, rows, schedule = *schedule]() -> Sample {
    kernels::ComputeThreadsScope one(1);  // one compute thread per worker
    dp::run_threads(stages, [&](dp::Communicator& comm) {
      const int s = comm.rank();
      trace::set_track(fmt::format("stage {}", s));
      auto& mine = st->results[static_cast<std::size_t>(s)];
      mine.clear();
      for (int k = 0; k <= kStepsPerSample; ++k)
        mine.push_back(pipeline_step(comm, *st->models[static_cast<std::size_t>(s)], st->bounds,
                                     data->x.data(), data->labels.data(), rows, m, schedule,
                                     &st->workspaces[static_cast<std::size_t>(s)]));
    });
    // Step 0 starts the threads and warms the caches: not counted. A step's time is stage 0's
    // (it runs the first forward and the last backward); its bubble, the share of p x that
    // time the stages did not compute.
    double step = 0, bubble = 0, busy = 0;
    std::size_t peak = 0;
    for (int k = 1; k <= kStepsPerSample; ++k) {
      const double t0 = st->results[0][static_cast<std::size_t>(k)].step_seconds;
      double b = 0;
      for (const auto& r : st->results) {
        b += r[static_cast<std::size_t>(k)].busy_seconds;
        peak = std::max(peak, r[static_cast<std::size_t>(k)].peak_activations);
      }
      step += t0;
      busy += b / stages;
      bubble += 1.0 - b / (stages * t0);
    }
    Sample out(step / kStepsPerSample);
    out.metrics["bubble_fraction"] = bubble / kStepsPerSample;
    out.metrics["stage_busy_s"] = busy / kStepsPerSample;
    out.metrics["peak_activations"] = static_cast<double>(peak);
    return out;
  };
  // Each stage's layers hold the whole batch's gradient (one process's), after every sample.
  t.check = [st, data, stages]() -> std::string {
    const auto& off = st->models[0]->layer_offsets();
    for (int s = 0; s < stages; ++s) {
      const auto got = st->models[static_cast<std::size_t>(s)]->gradients();
      for (std::size_t i = off[st->bounds[static_cast<std::size_t>(s)]];
           i < off[st->bounds[static_cast<std::size_t>(s) + 1]]; ++i)
        if (!(std::fabs(got[i] - data->want[i]) <= 1e-4f * (1.0f + std::fabs(data->want[i]))))
          return fmt::format("stage {}: gradient {} is {}, one process's {}", s, i, got[i],
                             data->want[i]);
    }
    return "";
  };
  t.work.items = static_cast<double>(rows);
  double flops = 0;
  for (std::size_t l = 0; l < layers; ++l)
    flops += 6.0 * static_cast<double>(rows * data->spec.widths[l] * data->spec.widths[l + 1]);
  t.work.flops = flops;
  if (static_cast<unsigned>(stages) > hardware_threads())
    t.notes["oversubscribed"] = fmt::format(
        "{} stages on {} hardware threads: the stages share cores, so waiting for a core counts "
        "as bubble",
        stages, hardware_threads());
  return t;
}

const std::vector<Metric> kPipelineMetrics = {
    {"bubble_fraction", "", true,
     "1 - (the stages' compute time) / (stages x the step's time): the share of the stages' "
     "time spent waiting for a neighbour or moving messages"},
    {"stage_busy_s", "s", true, "a stage's compute time in a step (forwards, backwards, loss)"},
    {"peak_activations", "", true,
     "the most micro-batches whose activations one stage held at once (the largest stage's)"}};

// The model's bubble, as a curve over m at p stages.
Model bubble_curve(int p, const std::string& schedule, const std::string& label) {
  return {.label = label,
          .series = schedule,
          .y = [p, schedule](const ModelPoint& pt) -> std::optional<double> {
            return bubble_model(schedule, p, pt.x);
          }};
}

// One stage's step at p = 1 (the whole model on one thread) with m micro-batches, from the
// run's records; the projection's t1.
std::optional<double> one_stage_step(const ModelPoint& pt, const std::string& m) {
  for (const Record* r : pt.run_records)
    if (r->params.at("stages") == "1" && r->params.at("micro_batches") == m &&
        r->params.at("schedule") == "1f1b")
      return r->stats.median;
  return std::nullopt;
}

// Pipeline step at p stages on a link: each stage computes 1/p of the model for m + p - 1
// micro-batch slots, and each slot boundary moves one micro-batch's activations (forward) or
// gradients (backward) to a neighbour: 2 (m + p - 1) messages on the critical path.
std::optional<double> projected_pipeline(const ModelPoint& pt, const dp::Link& link,
                                         const std::string& m_text) {
  const auto t1 = one_stage_step(pt, m_text);
  if (!t1) return std::nullopt;
  double rows = 0, width = 0;
  for (const Record* r : pt.run_records) {
    rows = static_cast<double>(param_int(r->params, "rows"));
    width = static_cast<double>(param_int(r->params, "width"));
    break;
  }
  const double p = pt.x, m = std::stod(m_text);
  const double compute = *t1 / p * (m + p - 1) / m;
  const double message = link.alpha_s + rows / m * width * sizeof(float) * link.beta_s_per_byte;
  return compute + (p > 1 ? 2 * (m + p - 1) * message : 0.0);
}

std::vector<double> projection_devices() { return {1, 2, 4, 8, 16, 32, 64}; }
// A pipeline has at most one stage per layer: the 16-layer model's projection stops at 16.
std::vector<double> projection_stages() { return {1, 2, 4, 8, 16}; }

std::vector<Model> pipeline_projection(const std::string& m) {
  std::vector<Model> out;
  for (const dp::Link* link : {&dp::kLink25GBs, &dp::kLink100GbE})
    out.push_back(
        {.label = fmt::format("1F1B, m = {}, projected: {}", m, link->name),
         .y = [link, m](const ModelPoint& pt) { return projected_pipeline(pt, *link, m); },
         .xs = projection_stages(),
         .note = [m](const ModelPoint& pt) -> std::string {
           const auto t1 = one_stage_step(pt, m);
           if (!t1) return "";
           return fmt::format(
               "projection: step(p) = t1/p x (m+p-1)/m + 2(m+p-1)(alpha + "
               "micro-batch activations x beta), t1 = {:.4g} s (1 stage, 1F1B, m = "
               "{}, measured); links as chapter 05's; a model, not a measurement",
               *t1, m);
         }});
  return out;
}

const bool registered_pipeline = register_experiment({
    .id = "ch06/pipeline",
    .chapter = "06-model-parallel",
    .title = "Pipeline parallelism: one training step of a 16-layer MLP over p stages, m "
             "micro-batches, naive / GPipe / 1F1B: step time, bubble, activations held",
    .axes = {{.name = "schedule", .values = {"naive", "gpipe", "1f1b"}},
             {.name = "stages",
              .values = {"1", "2", "4"},
              .kind = AxisKind::count,
              .max = kMaxStages,
              .smoke = {"2"}},
             {.name = "micro_batches",
              .values = {"1", "2", "4", "8", "16"},
              .quick = {"1", "4", "16"},
              .kind = AxisKind::count,
              .max = kMaxRows,
              .smoke = {"4"}},
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
              .smoke = {"32"}}},
    .baseline = {{"stages", "1"}},
    .metric = "time",
    .unit = "s",
    .lower_is_better = true,
    .metrics = kPipelineMetrics,
    .derive =
        [](const Params& p, const Work&, Record& r) {
          const double model =
              bubble_model(param_str(p, "schedule"), static_cast<double>(param_int(p, "stages")),
                           static_cast<double>(param_int(p, "micro_batches")));
          r.derived["bubble_model"] = model;
          if (const auto it = r.metrics.find("bubble_fraction"); it != r.metrics.end())
            r.derived["bubble_error"] = std::fabs(it->second.stats.median - model);
        },
    .scaling_axis = "stages",
    .interleave = {"schedule"},
    .repetitions = 5,
    .warmup = 1,
    .prepare = pipeline_trial,
    .figures = {{.id = "bubble_p2",
                 .title = "Bubble fraction against micro-batches, 2 stages",
                 .x = "micro_batches",
                 .y = "bubble_fraction",
                 .series = "schedule",
                 .where = {{"stages", "2"}},
                 .log_x = true,
                 .y_label = "bubble fraction (measured)",
                 .x_label = "micro-batches m (log)",
                 .models = {bubble_curve(2, "gpipe", "GPipe and 1F1B: (p-1)/(m+p-1)"),
                            bubble_curve(2, "naive", "naive: (p-1)/p")}},
                {.id = "bubble_p4",
                 .title = "Bubble fraction against micro-batches, 4 stages",
                 .x = "micro_batches",
                 .y = "bubble_fraction",
                 .series = "schedule",
                 .where = {{"stages", "4"}},
                 .log_x = true,
                 .y_label = "bubble fraction (measured)",
                 .x_label = "micro-batches m (log)",
                 .models = {bubble_curve(4, "gpipe", "GPipe and 1F1B: (p-1)/(m+p-1)"),
                            bubble_curve(4, "naive", "naive: (p-1)/p")}},
                {.id = "step_time_p2",
                 .title = "Step time against micro-batches, 2 stages",
                 .x = "micro_batches",
                 .y = "median",
                 .series = "schedule",
                 .where = {{"stages", "2"}},
                 .log_x = true,
                 .y_label = "time per training step (s)",
                 .x_label = "micro-batches m (log)"},
                {.id = "step_time_p4",
                 .title = "Step time against micro-batches, 4 stages",
                 .x = "micro_batches",
                 .y = "median",
                 .series = "schedule",
                 .where = {{"stages", "4"}},
                 .log_x = true,
                 .y_label = "time per training step (s)",
                 .x_label = "micro-batches m (log)"},
                {.id = "activations",
                 .title =
                     "Activations a stage holds at once, 4 stages: GPipe keeps m, 1F1B at most p",
                 .x = "micro_batches",
                 .y = "peak_activations",
                 .series = "schedule",
                 .where = {{"stages", "4"}},
                 .log_x = true,
                 .y_label = "micro-batches' activations held (largest stage)",
                 .x_label = "micro-batches m (log)"},
                {.id = "speedup",
                 .title = "Step speedup over one stage, m = 16",
                 .kind = FigureKind::speedup,
                 .x = "stages",
                 .series = "schedule",
                 .where = {{"micro_batches", "16"}}},
                {.id = "projection",
                 .title =
                     "1F1B step time against stages, m = 16, measured and projected (alpha-beta)",
                 .x = "stages",
                 .y = "median",
                 .series = "schedule",
                 .where = {{"micro_batches", "16"}, {"schedule", "1f1b"}},
                 .log_x = true,
                 .log_y = true,
                 .y_label = "time per training step (s, log)",
                 .x_label = "stages p (log)",
                 .models = pipeline_projection("16")}},
    .derived = {"bubble_model", "bubble_error"},
    .claims = {{.id = "gpipe_bubble_p2",
                .statement = "With 2 stages, GPipe's measured bubble is within 0.05 of the model "
                             "(p-1)/(m+p-1) at every m measured (1 to 16)",
                .select = {{"schedule", "gpipe"}, {"stages", "2"}},
                .field = "bubble_error",
                .compare = Claim::Compare::at_most,
                .bound = 0.05,
                .min_cpus = 2,
                .reference = 0.01832},
               {.id = "1f1b_bubble_p2",
                .statement = "With 2 stages, 1F1B's measured bubble is within 0.05 of the same "
                             "model: it reorders the work, it does not shrink the bubble",
                .select = {{"schedule", "1f1b"}, {"stages", "2"}},
                .field = "bubble_error",
                .compare = Claim::Compare::at_most,
                .bound = 0.05,
                .min_cpus = 2,
                .reference = 0.02634},
               {.id = "1f1b_holds_fewer_activations",
                .statement = "With 4 stages and 16 micro-batches, GPipe's busiest stage holds 4x "
                             "the activations 1F1B's does (16 against p = 4)",
                .select = {{"schedule", "1f1b"}, {"stages", "4"}, {"micro_batches", "16"}},
                .field = "peak_activations",
                .versus = {{"schedule", "gpipe"}},
                .bound = 4,
                .unit = "x",
                .timing = false,
                .reference = 4}},
});

// ---- ch06/tensor_parallel ---------------------------------------------------------------------

struct BlockData {
  std::vector<float> x, w1, b1, w2, b2, dy;
  std::vector<float> y, dx;  // one rank's (the unsplit block's) output and input gradient
};

Trial tensor_trial(const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const auto batch = static_cast<std::size_t>(param_int(p, "batch"));
  const auto width = static_cast<std::size_t>(param_int(p, "width"));
  const auto hidden = static_cast<std::size_t>(param_int(p, "hidden"));
  if (hidden % static_cast<std::size_t>(ranks) != 0)
    throw UsageError(
        fmt::format("hidden {} does not divide by {} ranks: each rank holds hidden/ranks features",
                    hidden, ranks));
  auto data = std::shared_ptr<BlockData>(
      &cache.get<BlockData>("data",
                            [&] {
                              BlockData d;
                              d.x = pseudo_random(batch * width, 1);
                              d.w1 = pseudo_random(hidden * width, 2);
                              d.b1 = pseudo_random(hidden, 3);
                              d.w2 = pseudo_random(width * hidden, 4);
                              d.b2 = pseudo_random(width, 5);
                              d.dy = pseudo_random(batch * width, 6);
                              for (float& w : d.w1) w *= 0.05f;
                              for (float& w : d.w2) w *= 0.05f;
                              kernels::ComputeThreadsScope one(1);  // one compute thread per worker
                              d.y.resize(batch * width);
                              d.dx.resize(batch * width);
                              dp::run_threads(1, [&](dp::Communicator& comm) {
                                ParallelMlpBlock block(comm, d.w1, d.b1, d.w2, d.b2, width, hidden,
                                                       width);
                                block.forward(d.x.data(), batch, d.y.data());
                                block.backward(d.dy.data(), batch, d.dx.data());
                              });
                              return d;
                            }),
      [](BlockData*) {});
  struct State {
    std::vector<float> y, dx;  // rank 0's, of the last sample
    std::vector<double> block_s, comm_s;
  };
  auto st = std::make_shared<State>();
  st->y.resize(batch * width);
  st->dx.resize(batch * width);
  st->block_s.assign(static_cast<std::size_t>(ranks), 0);
  st->comm_s.assign(static_cast<std::size_t>(ranks), 0);
  Trial t;
  t.measure = [st, data, ranks, batch, width, hidden]() -> Sample {
    kernels::ComputeThreadsScope one(1);  // one compute thread per worker
    dp::run_threads(ranks, [&](dp::Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      ParallelMlpBlock block(comm, data->w1, data->b1, data->w2, data->b2, width, hidden, width);
      std::vector<float> y(batch * width), dx(batch * width);
      comm.barrier();
      auto t0 = Clock::now();
      block.forward(data->x.data(), batch, y.data());
      block.backward(data->dy.data(), batch, dx.data());
      st->block_s[r] = std::chrono::duration<double>(Clock::now() - t0).count();
      // The block's communication alone: its two all-reduces, of y (forward) and dx
      // (backward), the same sizes on the same ranks.
      std::vector<float> a(batch * width, 1.0f), b(batch * width, 1.0f);
      comm.barrier();
      t0 = Clock::now();
      if (ranks > 1) {
        comm.all_reduce(a);
        comm.all_reduce(b);
      }
      st->comm_s[r] = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r == 0) {
        st->y = y;
        st->dx = dx;
      }
    });
    const double block = *std::max_element(st->block_s.begin(), st->block_s.end());
    const double comm = *std::max_element(st->comm_s.begin(), st->comm_s.end());
    Sample out(block);
    out.metrics["comm_s"] = comm;
    out.metrics["comm_share"] = ranks > 1 ? std::min(1.0, comm / block) : 0.0;
    return out;
  };
  t.check = [st, data]() -> std::string {
    for (std::size_t i = 0; i < data->y.size(); ++i)
      if (!(std::fabs(st->y[i] - data->y[i]) <= 1e-3f * (1.0f + std::fabs(data->y[i]))))
        return fmt::format("output {} is {}, the unsplit block's {}", i, st->y[i], data->y[i]);
    for (std::size_t i = 0; i < data->dx.size(); ++i)
      if (!(std::fabs(st->dx[i] - data->dx[i]) <= 1e-3f * (1.0f + std::fabs(data->dx[i]))))
        return fmt::format("input gradient {} is {}, the unsplit block's {}", i, st->dx[i],
                           data->dx[i]);
    return "";
  };
  t.work.items = static_cast<double>(batch);
  t.work.flops = 2.0 * 3.0 * 2.0 * static_cast<double>(batch * width * hidden);
  if (static_cast<unsigned>(ranks) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} ranks on {} hardware threads", ranks, hardware_threads());
  return t;
}

// The block on p devices: one device's time split p ways, plus its two ring all-reduces of
// batch x width floats on the link.
std::optional<double> projected_block(const ModelPoint& pt, const dp::Link& link) {
  for (const Record* r : pt.run_records) {
    if (r->params.at("ranks") != "1") continue;
    const double bytes =
        static_cast<double>(param_int(r->params, "batch") * param_int(r->params, "width")) *
        sizeof(float);
    const auto terms = dp::allreduce_cost_terms("v4_ring", pt.x);
    const double ar =
        terms ? terms->alpha_terms * link.alpha_s + terms->byte_terms * bytes * link.beta_s_per_byte
              : 0.0;
    return r->stats.median / pt.x + 2 * ar;
  }
  return std::nullopt;
}

std::vector<Model> tensor_projection() {
  std::vector<Model> out;
  for (const dp::Link* link : {&dp::kLink25GBs, &dp::kLink100GbE})
    out.push_back({.label = fmt::format("projected: {}", link->name),
                   .y = [link](const ModelPoint& pt) { return projected_block(pt, *link); },
                   .xs = projection_devices(),
                   .note = [](const ModelPoint&) -> std::string {
                     return "projection: block(p) = block(1)/p + 2 ring all-reduces of batch x "
                            "width floats, 2(p-1) alpha + 2(p-1)/p bytes beta each; a model, not "
                            "a measurement";
                   }});
  return out;
}

const bool registered_tensor = register_experiment({
    .id = "ch06/tensor_parallel",
    .chapter = "06-model-parallel",
    .title = "Tensor parallelism: Megatron's MLP block forward and backward on p ranks, and the "
             "share its two all-reduces take",
    .axes = {{.name = "ranks",
              .values = {"1", "2", "4"},
              .kind = AxisKind::count,
              .max = 256,
              .smoke = {"2"}},
             {.name = "batch",
              .values = {"256"},
              .quick = {"128"},
              .kind = AxisKind::count,
              .max = kMaxRows,
              .smoke = {"8"}},
             {.name = "width",
              .values = {"1024"},
              .quick = {"512"},
              .kind = AxisKind::size,
              .max = kMaxWidth,
              .smoke = {"32"}},
             {.name = "hidden",
              .values = {"4096"},
              .quick = {"2048"},
              .kind = AxisKind::size,
              .max = 4 * kMaxWidth,
              .smoke = {"64"}}},
    .baseline = {{"ranks", "1"}},
    .metric = "time",
    .unit = "s",
    .lower_is_better = true,
    .metrics = {{"comm_s", "s", true,
                 "the block's two all-reduces (batch x width floats each) timed alone on the "
                 "same ranks"},
                {"comm_share", "", true, "comm_s / the block's time: communication's share"}},
    .scaling_axis = "ranks",
    .repetitions = 7,
    .warmup = 1,
    .prepare = tensor_trial,
    .figures = {{.id = "speedup",
                 .title = "Megatron MLP block: speedup over one rank",
                 .kind = FigureKind::speedup,
                 .x = "ranks",
                 .series = "width"},
                {.id = "comm_share",
                 .title = "Megatron MLP block: the share of its time the two all-reduces take",
                 .kind = FigureKind::bars,
                 .x = "ranks",
                 .y = "comm_share",
                 .series = "width",
                 .y_label = "all-reduce time / block time"},
                {.id = "projection",
                 .title = "Megatron MLP block time against ranks, measured and projected "
                          "(alpha-beta)",
                 .x = "ranks",
                 .y = "median",
                 .series = "width",
                 .log_x = true,
                 .log_y = true,
                 .y_label = "forward + backward (s, log)",
                 .x_label = "ranks p (log)",
                 .models = tensor_projection()}},
    .claims = {{.id = "block_speedup_2_ranks",
                .statement = "Megatron's MLP block runs forward and backward at least 1.6x as fast "
                             "on 2 ranks as on one (each rank does half the arithmetic)",
                .select = {{"ranks", "2"}},
                .field = "speedup",
                .bound = 1.6,
                .unit = "x",
                .min_cpus = 2,
                .reference = 1.971},
               {.id = "block_comm_share_2_ranks",
                .statement = "On 2 thread ranks the block's two all-reduces take under 5% of its "
                             "time: in shared memory they are cheap beside the GEMMs",
                .select = {{"ranks", "2"}},
                .field = "comm_share",
                .compare = Claim::Compare::at_most,
                .bound = 0.05,
                .min_cpus = 2,
                .reference = 0.002736}},
});

}  // namespace

}  // namespace concurdl::mp
