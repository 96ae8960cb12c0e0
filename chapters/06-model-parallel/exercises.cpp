// Chapter 06's exercises (exercises/exercises.md), graded by `concurdl exercise ch06
// [6.1 6.2 6.3]`: the tests first, then the student's code timed against the chapter's own in one
// process, interleaved, on thread ranks of chapter 05's communicator:
//   6.1 column-parallel Linear   forward and backward of a 784 -> 512 layer, batch 256, split
//                                over 2 ranks: student_column_* vs ColumnParallelLinear
//   6.2 the 1F1B order           one pipeline step of a 256-512-512-512-10 MLP on 2 stages,
//                                256 rows in 8 micro-batches: student_1f1b_order vs stage_order
//   6.3 the ZB-H1 order          the same step: student_zb_h1_order vs stage_order's zb-h1
// Every trial is checked after it runs (every rank's output and gradients against one process's
// forward and backward of the unsplit layer or model): a wrong result is an invalid run, never
// a fast one.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "concurdl/nn/mlp.hpp"
#include "exercises/student_1f1b.hpp"
#include "exercises/student_column_parallel.hpp"
#include "exercises/student_zb_h1.hpp"

namespace concurdl::mp {

namespace {

// Features and rows: 2^14 each keeps one matrix at most 1 GiB.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 14;
constexpr std::int64_t kMaxRanks = 64;
// Trials of a few milliseconds whose two threads share the machine's cores with everything else
// on it: more repetitions than kExerciseRepetitions, so that the interval of the ratio of
// medians is narrow enough to judge (still well under a second per exercise).
constexpr int kRepetitions = 41;
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;  // [-1, 1)
  }
  return v;
}

// "" when every element of got is within float tolerance of want, else the first that is not.
std::string first_difference(std::span<const float> got, std::span<const float> want,
                             const std::string& what) {
  if (got.size() != want.size())
    return fmt::format("{}: {} values, expected {}", what, got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i]))))
      return fmt::format("{}[{}] is {}, one process computes {}", what, i, got[i], want[i]);
  return "";
}

// --- 6.1 the column-parallel Linear ------------------------------------------------------------

// The layer, its input and output gradient, and what every rank must end with: its columns of
// y, its block of dw and db, and the whole dx, from one process's unsplit forward and backward.
struct ColumnInputs {
  std::size_t batch = 0, in = 0, out = 0;
  int ranks = 0;
  std::vector<float> x, w, b, dx;
  std::vector<std::vector<float>> dy_local, y_local;  // per rank
  std::vector<LinearShard> grads;                     // per rank: dw in .w, db in .b
};

std::vector<float> columns(const std::vector<float>& m, std::size_t rows, std::size_t cols, int r,
                           int p) {
  const std::size_t k = cols / static_cast<std::size_t>(p), first = k * static_cast<std::size_t>(r);
  std::vector<float> c(rows * k);
  for (std::size_t row = 0; row < rows; ++row)
    std::copy_n(m.begin() + static_cast<std::ptrdiff_t>(row * cols + first), k,
                c.begin() + static_cast<std::ptrdiff_t>(row * k));
  return c;
}

std::shared_ptr<const ColumnInputs> column_inputs(std::size_t batch, std::size_t in,
                                                  std::size_t out, int ranks) {
  auto c = std::make_shared<ColumnInputs>();
  c->batch = batch;
  c->in = in;
  c->out = out;
  c->ranks = ranks;
  c->x = values(batch * in, 1);
  const std::vector<float> dy = values(batch * out, 2);
  c->w = values(out * in, 3);
  for (float& v : c->w) v *= 0.05f;
  c->b = values(out, 4);
  // The unsplit layer in one process, with the GEMM kernels of the suite's own (v3, not the
  // OpenBLAS the reference calls): y = x W^T + b, dW = dy^T x, db = dy's column sums, dx = dy W.
  using kernels::Trans;
  const auto v3 = kernels::GemmVersion::v3_blocked;
  std::vector<float> y(batch * out), dw(out * in), db(out, 0.0f);
  kernels::gemm(v3, Trans::no, Trans::yes, batch, out, in, 1.0f, c->x.data(), in, c->w.data(), in,
                0.0f, y.data(), out);
  for (std::size_t r = 0; r < batch; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      y[r * out + o] += c->b[o];
      db[o] += dy[r * out + o];
    }
  kernels::gemm(v3, Trans::yes, Trans::no, out, in, batch, 1.0f, dy.data(), out, c->x.data(), in,
                0.0f, dw.data(), in);
  c->dx.resize(batch * in);
  kernels::gemm(v3, Trans::no, Trans::no, batch, in, out, 1.0f, dy.data(), out, c->w.data(), in,
                0.0f, c->dx.data(), in);
  for (int r = 0; r < ranks; ++r) {
    c->dy_local.push_back(columns(dy, batch, out, r, ranks));
    c->y_local.push_back(columns(y, batch, out, r, ranks));
    c->grads.push_back(column_shard(dw, db, in, out, r, ranks));
  }
  return c;
}

// One forward and backward of the layer on `ranks` thread ranks, each rank with its shard.
Trial column_trial(Impl impl, const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const auto batch = static_cast<std::size_t>(param_int(p, "batch"));
  const auto in = static_cast<std::size_t>(param_int(p, "in"));
  const auto out = static_cast<std::size_t>(param_int(p, "out"));
  if (out % static_cast<std::size_t>(ranks) != 0)
    throw UsageError(
        fmt::format("parameter 'out': {} output features do not divide over {} ranks", out, ranks));
  const auto in_ = cache.get<std::shared_ptr<const ColumnInputs>>(
      "column_inputs", [&] { return column_inputs(batch, in, out, ranks); });
  struct State {
    std::vector<LinearShard> shards;
    std::vector<std::vector<float>> y, dx;
  };
  auto st = std::make_shared<State>();
  const auto n = static_cast<std::size_t>(ranks);
  st->shards.resize(n);
  st->y.resize(n);
  st->dx.resize(n);
  Trial t;
  t.reset = [st, in_] {
    kernels::settle_runtime(kernels::ThreadRuntime::openblas);
    for (int r = 0; r < in_->ranks; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      st->shards[ru] = column_shard(in_->w, in_->b, in_->in, in_->out, r, in_->ranks);
      std::fill(st->shards[ru].dw.begin(), st->shards[ru].dw.end(), kPoison);
      std::fill(st->shards[ru].db.begin(), st->shards[ru].db.end(), kPoison);
      st->y[ru].assign(in_->y_local[ru].size(), kPoison);
      st->dx[ru].assign(in_->dx.size(), kPoison);
    }
  };
  t.run = [st, in_, impl] {
    const kernels::ComputeThreadsScope one(1);  // one compute thread per worker
    dp::run_threads(in_->ranks, [&](dp::Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      const float* x = in_->x.data();
      const float* dy = in_->dy_local[r].data();
      if (impl == Impl::student) {
        student_column_forward(comm, st->shards[r], x, in_->batch, st->y[r].data());
        student_column_backward(comm, st->shards[r], x, dy, in_->batch, st->dx[r].data());
      } else {
        ColumnParallelLinear layer(comm, std::move(st->shards[r]));
        layer.forward(x, in_->batch, st->y[r].data());
        layer.backward(x, dy, in_->batch, st->dx[r].data());
        st->shards[r] = std::move(layer.shard());
      }
    });
  };
  t.check = [st, in_]() -> std::string {
    for (int r = 0; r < in_->ranks; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      const std::string rank = fmt::format("rank {}'s ", r);
      for (std::string e : {first_difference(st->y[ru], in_->y_local[ru], rank + "y_local"),
                            first_difference(st->dx[ru], in_->dx, rank + "dx"),
                            first_difference(st->shards[ru].dw, in_->grads[ru].w, rank + "dw"),
                            first_difference(st->shards[ru].db, in_->grads[ru].b, rank + "db")})
        if (!e.empty()) return e;
    }
    return "";
  };
  // Three GEMMs of batch x in x out over all ranks (y, dw, dx): 6 batch in out FLOPs.
  t.work = {.items = static_cast<double>(batch),
            .flops = 6.0 * static_cast<double>(batch) * static_cast<double>(in) *
                     static_cast<double>(out)};
  return t;
}

// --- 6.2 the 1F1B order ------------------------------------------------------------------------

const nn::MlpSpec kPipeSpec{{256, 512, 512, 512, 10}};
constexpr std::uint64_t kPipeSeed = 6;

// The batch and what one process's forward and backward of it gives every parameter.
struct PipeInputs {
  std::vector<float> x, gradients;
  std::vector<std::uint8_t> labels;
};

std::shared_ptr<const PipeInputs> pipe_inputs(std::size_t rows) {
  auto in = std::make_shared<PipeInputs>();
  in->x = values(rows * kPipeSpec.widths.front(), 8);
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
Trial pipeline_trial(OrderOf order_of, Impl impl, const Params& p, GroupCache& cache) {
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

const bool registered = [] {
  register_exercise(
      {.id = "6.1",
       .chapter = "06-model-parallel",
       .title = "a column-parallel Linear's forward and backward",
       .test_binary = "ch06_tests",
       .test_filter = "ColumnLinearEx6_1/student.*",
       .timing = exercise_timing(
           {.title = "column-parallel Linear forward and backward on thread ranks, student vs "
                     "ColumnParallelLinear",
            .threads_axis = "",
            .axes = {{"ranks", {"2"}, {}, AxisKind::count, kMaxRanks},
                     {"batch", {"256"}, {}, AxisKind::count, kMaxDim, {"16"}},
                     {"in", {"784"}, {}, AxisKind::count, kMaxDim, {"32"}},
                     {"out", {"512"}, {}, AxisKind::count, kMaxDim, {"32"}}},
            .repetitions = kRepetitions,
            .prepare = column_trial}),
       .target = 1.3,
       .questions = {
           "Your layer took {student} for a forward and a backward against "
           "ColumnParallelLinear's {reference} at {configuration} on {machine}: a cost of {cost} "
           "(95% interval {cost_ci}). Count the FLOPs each rank computes in one step (three "
           "GEMMs) and the bytes the all-reduce of dx moves: what GFLOP/s does a rank of yours "
           "reach, and what share of the step is the all-reduce? (Time the backward with dx null "
           "to find out.) If you wrote loops, time kernels::gemm's versions in their place and "
           "say what the fastest one does that your loops do not.",
           "Why does the column-parallel layer need no communication forward and an all-reduce "
           "backward, and why do its dw and db need none? Megatron follows it with a "
           "row-parallel layer (RowParallelLinear): say what that one communicates forward and "
           "backward, and why the MLP block's hidden activations never travel between the ranks "
           "(ParallelMlpBlock::all_reduces() counts what the block does).",
           "For this layer (784 -> 512) at batch B on p ranks, tensor parallelism all-reduces B x "
           "784 floats of dx per step, while data parallelism (chapter 05) all-reduces the "
           "layer's 784 x 512 + 512 gradients. At which batch does each move fewer bytes, and "
           "what does each replicate that the other splits? Why do large models keep tensor "
           "parallelism within a node (NVLink) and data parallelism across nodes?"}});

  register_exercise(
      {.id = "6.2",
       .chapter = "06-model-parallel",
       .title = "the 1F1B schedule's order of operations",
       .test_binary = "ch06_tests",
       .test_filter = "OneFOneBEx6_2/student.*",
       .timing = exercise_timing(
           {.title = "pipeline step on thread ranks (256-512-512-512-10), student's order vs "
                     "stage_order's 1F1B",
            .threads_axis = "",
            .axes = {{"stages", {"2"}, {}, AxisKind::count, 4},
                     {"rows", {"256"}, {}, AxisKind::count, kMaxDim, {"8"}},
                     {"micro_batches", {"8"}, {}, AxisKind::count, kMaxDim, {"4"}}},
            .repetitions = kRepetitions,
            .prepare =
                [](Impl impl, const Params& p, GroupCache& cache) {
                  return pipeline_trial(&one_f_one_b_order, impl, p, cache);
                }}),
       .questions = {
           "Your order's step took {student} against stage_order's {reference} at "
           "{configuration} on {machine} ({cost}, 95% interval {cost_ci}). Both run the same "
           "pipeline_step: what is this timing able to tell apart, then? Run one step of 4 "
           "stages and 8 micro-batches (adapt APipelineStepGivesTheWholeBatchsGradients in "
           "tests/test_exercises.cpp) with your order, GPipe's and naive's, and quote each "
           "stage's step_seconds, busy_seconds and peak_activations from PipelineStepResult.",
           "With p stages, m micro-batches and a forward and backward that take the same time on "
           "every stage, what fraction of a step does each stage idle (the bubble) under GPipe "
           "and under 1F1B, and under the naive schedule? How large must m be for a bubble under "
           "10% at p = 4, and what does a larger m cost? What, then, does 1F1B buy over GPipe?",
           "Why is stage s's warm-up exactly p - s - 1 forwards: what happens to the bubble with "
           "fewer (the naive schedule has none) and to the activations held with more (GPipe "
           "warms up with all m)? pipeline_step's sends do not wait for their receive: in 1F1B's "
           "steady state, which two stages send to each other at the same time, and what would "
           "happen if a send blocked until its receive was posted?"}});

  register_exercise(
      {.id = "6.3",
       .chapter = "06-model-parallel",
       .title = "the ZB-H1 schedule's order of operations",
       .test_binary = "ch06_tests",
       .test_filter = "ZeroBubbleEx6_3/student.*",
       .timing = exercise_timing(
           {.title = "pipeline step on thread ranks (256-512-512-512-10), student's order vs "
                     "stage_order's ZB-H1",
            .threads_axis = "",
            .axes = {{"stages", {"2"}, {}, AxisKind::count, 4},
                     {"rows", {"256"}, {}, AxisKind::count, kMaxDim, {"8"}},
                     {"micro_batches", {"8"}, {}, AxisKind::count, kMaxDim, {"4"}}},
            .repetitions = kRepetitions,
            .prepare =
                [](Impl impl, const Params& p, GroupCache& cache) {
                  return pipeline_trial(&zb_h1_order, impl, p, cache);
                }}),
       .questions = {
           "Your order's step took {student} against stage_order's {reference} at "
           "{configuration} on {machine} ({cost}, 95% interval {cost_ci}). Run the same step "
           "under 1F1B and ZB-H1 with --trace (concurdl run ch06/schedules --trace --set "
           "stages=2 --set micro_batches=4 --set recompute=off) and point, in the two timelines, "
           "at the idle time ZB-H1 removed: where was stage 0 waiting under 1F1B, and for what?",
           "With F, B and W one slot each, 1F1B's bubble is 3(p - 1) slots and ZB-H1's p - 1 "
           "(m >= p). Derive ZB-H1's: which W's fill the idle slots at the start and end of "
           "stage s's step? Then take this MLP's real costs: stage 0 computes no input gradient "
           "for its first layer, and the last stage computes the loss. What does that do to the "
           "bubble the W's can fill (compare bubble_fraction with bubble_model in the run)?",
           "ZB-H1 holds min(m, p) micro-batches in flight on every stage, 1F1B's most, yet "
           "ch06/schedules measures its busiest stage keeping about twice 1F1B's bytes on this "
           "MLP. Count what a micro-batch keeps between its B and its W, and say why "
           "recomputation (--recompute) does not lower ZB-H1's peak here. What would a layer "
           "whose backward needs intermediates that its weight gradient does not (attention's) "
           "change?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::mp
