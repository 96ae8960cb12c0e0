// Chapter 06's tensor-parallel experiment (the chapter and ch06/pipeline: experiments.cpp):
//   ch06/tensor_parallel  Megatron's MLP block (column- then row-parallel Linear) forward and
//                         backward on 1, 2, 4 thread ranks: the time, and the share of it its
//                         two all-reduces take (timed alone on the same ranks, same sizes)
//   exercise 6.1          the student's column-parallel Linear (student_column_forward and
//                         student_column_backward) against ColumnParallelLinear, forward and
//                         backward of a 784 -> 512 layer, batch 256, split over 2 ranks
// Every trial's output and input gradient are checked against the unsplit block's (the
// exercise's: every rank's output and gradients against the unsplit layer's), and the block is
// projected to more devices with chapter 05's α–β links, drawn as models.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/cost_model.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "exercise_timings.hpp"
#include "exercises/student_column_parallel.hpp"
#include "experiments_common.hpp"

namespace concurdl::mp {

namespace {

using Clock = std::chrono::steady_clock;
using detail::first_difference;
using detail::kMaxRows;
using detail::kMaxWidth;
using detail::kPoison;
using detail::projection_devices;
using detail::pseudo_random;

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
                // Magnitude: a scaling ratio on vCPUs (1.79x on the Emerald Rapids
                // guest, 1.93-2.02x on Zen 4).
                .statement =
                    "How many times as fast Megatron's MLP block runs forward and backward on 2 "
                    "ranks as on one (each rank does half the arithmetic)",
                .select = {{"ranks", "2"}},
                .field = "speedup",
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::caches},
                .unit = "x",
                .min_cpus = 2},
               {.id = "block_comm_share_2_ranks",
                // A magnitude: the GEMMs' speed against a shared-memory all-reduce's (0.003-0.026
                // on the committed guests).
                .statement = "On 2 thread ranks, the share of Megatron's MLP block's time its two "
                             "all-reduces take (in shared memory, beside the GEMMs)",
                .select = {{"ranks", "2"}},
                .field = "comm_share",
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::memory_bandwidth, ClaimCause::wakeup_latency},
                .min_cpus = 2}},
});

// --- exercise 6.1: the column-parallel Linear --------------------------------------------------

constexpr std::int64_t kMaxRanks = 64;

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
  c->x = pseudo_random(batch * in, 1);
  const std::vector<float> dy = pseudo_random(batch * out, 2);
  c->w = pseudo_random(out * in, 3);
  for (float& v : c->w) v *= 0.05f;
  c->b = pseudo_random(out, 4);
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

}  // namespace

}  // namespace concurdl::mp

// The timed half of exercise 6.1 (exercise_timings.hpp).
namespace concurdl::mp::exercise_timings {

Experiment column_parallel() {
  using detail::kMaxExerciseDim;
  return exercise_timing(
      {.title = "column-parallel Linear forward and backward on thread ranks, student vs "
                "ColumnParallelLinear",
       .threads_axis = "",
       .axes = {{"ranks", {"2"}, {}, AxisKind::count, kMaxRanks},
                {"batch", {"256"}, {}, AxisKind::count, kMaxExerciseDim, {"16"}},
                {"in", {"784"}, {}, AxisKind::count, kMaxExerciseDim, {"32"}},
                {"out", {"512"}, {}, AxisKind::count, kMaxExerciseDim, {"32"}}},
       .repetitions = detail::kExerciseTrialRepetitions,
       .prepare = column_trial});
}

}  // namespace concurdl::mp::exercise_timings
