// Chapter 06's tensor-parallel experiment (the chapter and ch06/pipeline: experiments.cpp):
//   ch06/tensor_parallel  Megatron's MLP block (column- then row-parallel Linear) forward and
//                         backward on 1, 2, 4 thread ranks: the time, and the share of it its
//                         two all-reduces take (timed alone on the same ranks, same sizes)
// Every trial's output and input gradient are checked against the unsplit block's, and the
// block is projected to more devices with chapter 05's α–β links, drawn as models.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/cost_model.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "experiments_common.hpp"

namespace concurdl::mp {

namespace {

using Clock = std::chrono::steady_clock;
using detail::kMaxRows;
using detail::kMaxWidth;
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

}  // namespace

}  // namespace concurdl::mp
