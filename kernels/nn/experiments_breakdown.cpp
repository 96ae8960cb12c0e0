// kernels/train_breakdown: where a training step's time goes. One epoch of the default MLP
// (784-256-128-10, batch 64) is run with the step's phases recorded as spans (step_span.hpp: the
// batch gather, each layer's forward GEMM (its bias and ReLU fused in), the loss, each layer's
// weight- and input-gradient GEMMs (the ReLU' of the layer below fused into the latter), bias
// gradients, the SGD update), and each configuration of the `phase` axis (kPhases: the GEMMs
// per layer, the bias gradients of all layers together) reports its
// phase's time per step, with the step's time and the phase's fraction
// of it; `other` is the step less every phase (the loop, the spans themselves). The phases of a
// GEMM and thread count are measured round-robin, so the stacked bar of one configuration adds
// up to its step. Each phase declares its FLOPs and bytes per step, so its FLOP/s and bytes/s
// can be set beside the calibrated peak and bandwidth, and each record carries its roofline on
// its threads (Ceiling::roofline_per_worker: roofline_time_s, fraction_of_roofline; a bfloat16
// GEMM phase's FLOPs at VDPBF16PS's peak, measured in the run). The `update` axis: `fused` (the
// default, TrainConfig::fuse_update) applies each weight matrix's update inside the GEMM that
// computes its gradient, so `sgd` is the biases' update alone and the weights' is in the l*_dw_gemm
// phases; `separate` runs Sgd::step over every parameter after the backward pass (not in the
// profiles:
// `--set update=fused,separate` measures both, and the third figure draws the latter).
// The `precision` axis (full profile: fp32, bf16, fp16; quick: fp32) runs the step in 16 bits
// (fused: Mlp::train_step_mixed; separate:
// forward_backward_mixed then Sgd::step_16bit, with an `unscale` phase, the finiteness check); the
// `arch` axis adds the wide MLP (784-1024-1024-10) on the full profile. The last two figures stack
// each precision's step at one thread on GEMM v4.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/step_phases.hpp"
#include "concurdl/nn/trainer.hpp"
#include "own_peak.hpp"

namespace concurdl::nn {

namespace {

constexpr std::size_t kBatch = 64;

// The phases of the default MLP's step, in the order the step first runs them: each layer's
// GEMMs apart (the bulk of the work), the bias gradients of all layers in one, so that the
// stacked bar stays readable. The forward's bias + ReLU and the backward's ReLU' were phases of
// their own until they were fused into the GEMMs (gemm.hpp's GemmEpilogue): they are inside the
// GEMMs' phases now. The spans keep the layer of every phase (`concurdl run --trace`).
// A 16-bit step (the `precision` axis) adds `cast`, the master weights rounded to 16 bits where
// no update has written that copy since (a new trainer's first step; unfused, also the step
// after a skipped one; the batch is rounded in `gather`), and, unfused (`update=separate`),
// `unscale`, the 16-bit gradients checked for infinities and NaNs; its GEMM phases hold the
// 16-bit GEMM with the rounding of its output; its `sgd` is, fused, the biases' update, and
// unfused every parameter's. A step without one of the two (float32's: either; a fused 16-bit
// step: `unscale`) records no span for it, 0 s, and a note says so.
const std::vector<std::string> kPhases = {"gather",      "cast",       "l0_fwd_gemm", "l1_fwd_gemm",
                                          "l2_fwd_gemm", "loss",       "l2_dw_gemm",  "l2_da_gemm",
                                          "l1_dw_gemm",  "l1_da_gemm", "l0_dw_gemm",  "db",
                                          "unscale",     "sgd",        "other"};

// The phase a span of the step belongs to: "l2_db" to db; the rest are phases of their own.
std::string phase_of(const std::string& span) {
  if (span.size() > 3 && span[0] == 'l' && span.compare(3, 2, "db") == 0) return "db";
  return span;
}

// What one phase does per step of `rows` rows, averaged over an epoch of `steps`: FLOPs (GEMMs:
// 2mnk) and bytes (element-wise: what it reads and writes), summed over the layers for the
// element-wise groups.
Work phase_work(const std::string& phase, const MlpSpec& spec, std::size_t rows, bool fused,
                bool mixed, double steps) {
  Work w;
  const double b = static_cast<double>(rows), f = sizeof(float);
  const std::size_t layers = spec.widths.size() - 1;
  const auto width = [&](std::size_t i) { return static_cast<double>(spec.widths[i]); };
  double all_params = 0;
  for (std::size_t l = 0; l < layers; ++l) all_params += width(l + 1) * (width(l) + 1);
  // Fashion-MNIST's bytes read (1 a value: Dataset::pixels) and the batch written, as float32
  // or, in 16 bits, rounded as it is gathered (gather_batch_16bit).
  if (phase == "gather") w.bytes = b * width(0) * (1.0 + (mixed ? 2.0 : f));
  // 16 bits: the weights read as 4 bytes and written as 2, counted once an epoch (a new
  // trainer's first step: the update writes the 16-bit copy beside the parameters from then on;
  // unfused, a step after a skipped one rounds them again, so this is a lower bound); unfused,
  // the 16-bit gradients read as 2 bytes (the finiteness check; the update widens them itself).
  if (mixed && phase == "cast") w.bytes = 6.0 * all_params / steps;
  if (mixed && !fused && phase == "unscale") w.bytes = 2.0 * all_params;
  if (phase == "sgd") {
    double params = 0;
    // Fused, the biases only (the weights are updated in their GEMMs: p and v read and written
    // there, the gradient never stored).
    for (std::size_t l = 0; l < layers; ++l) params += width(l + 1) * (fused ? 1 : width(l) + 1);
    // p, g, v read; p, v written (unfused 16 bits: g read as 2 bytes), and in 16 bits the
    // parameters' rounding written (2 bytes)
    w.bytes = (4.0 * f + (mixed && !fused ? 2.0 : f) + (mixed ? 2.0 : 0.0)) * params;
  }
  for (std::size_t l = 0; l < layers; ++l) {
    if (phase == "db") w.bytes += b * width(l + 1) * (mixed ? 2.0 + f : f);
  }
  if (phase.size() > 3 && phase[0] == 'l' && phase.find("_gemm") != std::string::npos) {
    const auto l = static_cast<std::size_t>(phase[1] - '0');
    w.flops = 2.0 * b * width(l) * width(l + 1);
    // Fused, a weight-gradient GEMM also updates its weights: p and v read and written (16
    // bytes a weight), and in 16 bits the new weight's rounding written (2 more): the memory
    // side of its bound, beside the FLOPs.
    if (fused && phase.find("_dw_") != std::string::npos)
      w.bytes = (4.0 * f + (mixed ? 2.0 : 0.0)) * width(l) * width(l + 1);
  }
  return w;
}

struct BreakdownState {
  std::shared_ptr<const Dataset> data;
  TrainConfig config;
  std::unique_ptr<Trainer> trainer;
  EpochResult last;
};

Trial breakdown_trial(const Params& p, GroupCache& cache) {
  const std::string phase = param_str(p, "phase");
  if (std::find(kPhases.begin(), kPhases.end(), phase) == kPhases.end())
    throw UsageError(fmt::format("parameter 'phase': '{}' is not a phase of the step", phase));
  const auto images = static_cast<std::size_t>(param_int(p, "images"));
  const std::string update = param_str(p, "update");
  Precision precision = Precision::fp32;
  MlpSpec spec;
  try {
    precision = parse_precision(param_str(p, "precision"));
    spec = MlpSpec::parse(param_str(p, "arch"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (spec.widths.size() != 4)
    throw UsageError(fmt::format("parameter 'arch': '{}' has {} layers; the phases name three",
                                 param_str(p, "arch"), spec.widths.size() - 1));
  if (update != "fused" && update != "separate")
    throw UsageError(
        fmt::format("parameter 'update': '{}' is neither 'fused' nor 'separate'", update));
  auto data =
      cache.get<std::shared_ptr<const Dataset>>(fmt::format("fashion-mnist:{}", images), [&] {
        const data::FashionMnist fm = data::load_fashion_mnist();
        return std::make_shared<const Dataset>(to_dataset(fm.train, images));
      });
  auto st = std::make_shared<BreakdownState>();
  st->data = data;
  st->config.batch = kBatch;
  st->config.threads = static_cast<int>(param_int(p, "threads"));
  st->config.fuse_update = update == "fused";
  st->config.precision = precision;
  st->config.spec = spec;
  if (!kernels::parse_gemm_version(param_str(p, "gemm"), st->config.gemm))
    throw UsageError(fmt::format("gemm: '{}' is not a GEMM version", param_str(p, "gemm")));
  const double steps = std::ceil(static_cast<double>(data->n) / kBatch);
  Trial t;
  t.reset = [st] {
    st->trainer = std::make_unique<Trainer>(st->config, *st->data);
    kernels::settle_runtime(st->config.gemm == kernels::GemmVersion::openblas
                                ? kernels::ThreadRuntime::openblas
                                : kernels::ThreadRuntime::openmp);
  };
  t.measure = [st, phase, steps]() -> Sample {
    const StepPhaseSpans phases;
    trace::Recorder& rec = trace::Recorder::global();
    rec.start();
    st->last = st->trainer->run_epoch();
    const std::vector<trace::Event> events = rec.stop();
    std::map<std::string, double> seconds;
    double spans = 0;
    for (const trace::Event& e : events)
      if (e.category == "step") {
        seconds[phase_of(e.name)] += e.dur_us * 1e-6;
        spans += e.dur_us * 1e-6;
      }
    const double step = st->last.seconds / steps;
    const double mine = (phase == "other" ? st->last.seconds - spans : seconds[phase]) / steps;
    return Sample(mine, {{"step_s", step}, {"fraction", step > 0 ? mine / step : 0.0}});
  };
  t.check = [st]() -> std::string {
    if (!std::isfinite(st->last.loss) || st->last.loss >= std::log(10.0))
      return fmt::format(
          "mean loss {:.3f} after one epoch: not finite, or not below chance "
          "(ln 10 = 2.303)",
          st->last.loss);
    return "";
  };
  const bool mixed = precision != Precision::fp32;
  // A bfloat16 step's GEMMs run on VDPBF16PS (64 FLOPs an instruction, twice an FMA's): their
  // roofline takes that arithmetic's peak on the row's threads, measured once per group beside
  // them (GroupCache) as kernels/gemm_bf16 measures it. Float32's and FP16's (widened) GEMMs are
  // held to the calibrated FMA peak (Ceiling::roofline_per_worker).
  if (precision == Precision::bf16 && kernels::have_bf16() &&
      phase.find("_gemm") != std::string::npos)
    t.measure = with_own_peak(t.measure, bf16_peak_of_group(cache, st->config.threads));
  t.work = phase_work(phase, st->config.spec, kBatch, st->config.fuse_update, mixed,
                      steps);  // per step: the sample is per step
  if (!mixed && (phase == "cast" || phase == "unscale"))
    t.notes["phase"] = "a float32 step has no " + phase + " phase: no span, 0 s";
  else if (mixed && st->config.fuse_update && phase == "unscale")
    t.notes["phase"] =
        "a fused 16-bit step has no unscale phase (its update is applied in the GEMMs): no "
        "span, 0 s";
  return t;
}

const bool registered = register_experiment({
    .id = "kernels/train_breakdown",
    .chapter = "kernels",
    .title = "Where a training step's time goes: each phase of the MLP's step (batch 64), per "
             "step and as a fraction of it",
    .axes = {{.name = "gemm", .values = {"openblas", "v4_register"}},
             {.name = "threads",
              .values = thread_counts_up_to_cores(),
              .kind = AxisKind::count,
              .max = kMaxThreads},
             {.name = "phase", .values = kPhases},
             {.name = "precision",
              .values = {"fp32", "bf16", "fp16"},
              .quick = {"fp32"},
              .smoke = {"fp32", "bf16"}},
             {.name = "arch",
              .values = {"784-256-128-10", "784-1024-1024-10"},
              .quick = {"784-256-128-10"},
              .smoke = {"784-256-128-10"}},
             {.name = "update",
              .values = {"fused"},
              .check =
                  [](std::string_view v) {
                    if (v != "fused" && v != "separate")
                      throw UsageError(fmt::format(
                          "parameter 'update': '{}' is neither 'fused' nor 'separate'", v));
                  }},
             {.name = "images",
              .values = {"6400"},
              .quick = {"3200"},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTrain,
              .smoke = {"640"}}},
    .metrics = {{.name = "step_s",
                 .unit = "s",
                 .lower_is_better = true,
                 .what = "the whole step's time, measured in the same epoch as the phase"},
                {.name = "fraction",
                 .unit = "",
                 .lower_is_better = true,
                 .what = "the phase's share of the step"},
                {.name = "own_peak_flops",
                 .unit = "FLOP/s",
                 .lower_is_better = false,
                 .what = "bfloat16 GEMM phases only: VDPBF16PS's peak on the row's threads, "
                         "measured in this run (the roofline's arithmetic side)",
                 .optional = true}},
    .ceiling = Ceiling::roofline_per_worker,
    .interleave = {"phase"},
    .repetitions = 7,
    .prepare = breakdown_trial,
    .figures = {{.id = "phases_openblas",
                 .title = "A training step by phase, OpenBLAS GEMM (s per step of 64 samples)",
                 .kind = FigureKind::stacked,
                 .x = "threads",
                 .y = "median",
                 .series = "phase",
                 .where = {{"gemm", "openblas"},
                           {"update", "fused"},
                           {"precision", "fp32"},
                           {"arch", "784-256-128-10"}},
                 .y_label = "seconds per step"},
                {.id = "phases_v4",
                 .title = "A training step by phase, GEMM v4 (s per step of 64 samples)",
                 .kind = FigureKind::stacked,
                 .x = "threads",
                 .y = "median",
                 .series = "phase",
                 .where = {{"gemm", "v4_register"},
                           {"update", "fused"},
                           {"precision", "fp32"},
                           {"arch", "784-256-128-10"}},
                 .y_label = "seconds per step"},
                {.id = "phases_v4_separate",
                 .title = "A training step by phase, GEMM v4, the update a pass of its own (s "
                          "per step of 64 samples)",
                 .kind = FigureKind::stacked,
                 .x = "threads",
                 .y = "median",
                 .series = "phase",
                 .where = {{"gemm", "v4_register"},
                           {"update", "separate"},
                           {"precision", "fp32"},
                           {"arch", "784-256-128-10"}},
                 .y_label = "seconds per step"},
                {.id = "phases_by_precision",
                 .title = "A training step by phase and precision, 1 thread, GEMM v4 (s per "
                          "step of 64 samples)",
                 .kind = FigureKind::stacked,
                 .x = "precision",
                 .y = "median",
                 .series = "phase",
                 .where = {{"gemm", "v4_register"},
                           {"update", "fused"},
                           {"threads", "1"},
                           {"arch", "784-256-128-10"}},
                 .y_label = "seconds per step"},
                {.id = "phases_by_precision_wide",
                 .title = "The wide MLP's step (784-1024-1024-10) by phase and precision, 1 "
                          "thread, GEMM v4 (s per step of 64 samples)",
                 .kind = FigureKind::stacked,
                 .x = "precision",
                 .y = "median",
                 .series = "phase",
                 .where = {{"gemm", "v4_register"},
                           {"update", "fused"},
                           {"threads", "1"},
                           {"arch", "784-1024-1024-10"}},
                 .y_label = "seconds per step"}},
});

}  // namespace

}  // namespace concurdl::nn
