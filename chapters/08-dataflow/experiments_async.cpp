// ch08/async_frontend: N ops issued by a front end that spends `overhead_us` of its own per op
// (an interpreter's cost, as Python's is in front of a framework's kernels), run eagerly (each
// op runs inside its call: N (o + c)) or through the asynchronous engine (the call queues the op
// and returns: the back end runs the kernels while the front end spends its overhead on the
// next ones, about N max(o, c)). The front end pays o once per GEMM + its weight, once per
// ReLU and once for the input: ops + 1 times, the N of the models. The ops: a chain of `ops` GEMM +
// ReLU layers on side x side matrices, intra-op 1 (the front end and the back end are one thread
// each). The last value is checked against the eager chain.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/df/async_engine.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/threads.hpp"
#include "experiment_graphs.hpp"

namespace concurdl::df {

namespace {

// The front end's own work per op: a busy loop on the clock (an interpreter is busy, not asleep).
void front_end_cost(std::chrono::nanoseconds cost) {
  if (cost.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + cost;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// A layer's weight: pseudo_random scaled so that the chain's values neither die out nor grow.
Tensor layer_weight(std::size_t side, std::uint32_t seed) {
  Tensor t = pseudo_random(side, side, seed);
  const float back = 1.0f / std::sqrt(static_cast<float>(side));
  for (float& x : t.data) x = x * back * 1.7f;
  return t;
}

struct Chain {
  Tensor x;
  std::vector<Tensor> w;  // one per layer
  Tensor want;            // the last value, eagerly
};

Trial async_trial(const Params& p, GroupCache& cache) {
  const std::string mode = param_str(p, "mode");
  if (mode != "eager" && mode != "async")
    throw UsageError(fmt::format("parameter 'mode': '{}' is not eager or async", mode));
  const auto overhead = std::chrono::nanoseconds(
      static_cast<std::int64_t>(std::llround(param_real(p, "overhead_us") * 1000.0)));
  if (overhead.count() < 0)
    throw UsageError("parameter 'overhead_us': the front end's cost per op cannot be negative");
  const auto layers = static_cast<std::size_t>(param_int(p, "ops")) / 2;  // a GEMM and a ReLU each
  const auto side = static_cast<std::size_t>(param_int(p, "side"));
  if (layers == 0) throw UsageError("parameter 'ops': at least 2 (one GEMM and one ReLU)");
  auto chain = std::shared_ptr<Chain>(
      &cache.get<Chain>("chain",
                        [&] {
                          Chain c;
                          c.x = layer_weight(side, 1);
                          for (std::size_t l = 0; l < layers; ++l)
                            c.w.push_back(layer_weight(side, 2 + static_cast<std::uint32_t>(l)));
                          kernels::ComputeThreadsScope one(1);
                          Eager e;
                          NodeId v = e.input(c.x);
                          for (const Tensor& w : c.w) {
                            const NodeId wn = e.input(w);
                            v = e.call([&](Graph& g) { return g.relu(g.matmul(v, wn)); });
                          }
                          c.want = e.value(v);
                          return c;
                        }),
      [](Chain*) {});
  auto last = std::make_shared<std::optional<Tensor>>();
  Trial t;
  // The engine (its back-end thread) and the eager context are made once per configuration and
  // reset between repetitions, keeping their buffers, as a framework keeps its engine and its
  // caching allocator: what is timed is issuing and running the ops, not faulting in pages.
  // The input and the weights are variables (read where they are, not copied at the call).
  auto engine = mode == "async" ? std::make_shared<AsyncEngine>() : nullptr;
  auto eager = mode == "eager" ? std::make_shared<Eager>() : nullptr;
  t.reset = [engine, eager] {
    if (engine) engine->reset();
    if (eager) eager->reset();
  };
  t.run = [chain, engine, eager, overhead, last, side] {
    kernels::ComputeThreadsScope one(1);
    if (engine) {
      front_end_cost(overhead);
      AsyncEngine::Future v = engine->variable(side, side, chain->x.data.data());
      for (const Tensor& w : chain->w) {
        front_end_cost(overhead);
        const AsyncEngine::Future m =
            engine->matmul(v, engine->variable(side, side, w.data.data()));
        front_end_cost(overhead);
        v = engine->relu(m);
      }
      *last = v.value();  // the one synchronisation point
      return;
    }
    Eager& e = *eager;
    front_end_cost(overhead);
    NodeId v = e.call([&](Graph& g) { return g.variable(side, side, chain->x.data.data()); });
    for (const Tensor& w : chain->w) {
      front_end_cost(overhead);
      const NodeId m =
          e.call([&](Graph& g) { return g.matmul(v, g.variable(side, side, w.data.data())); });
      front_end_cost(overhead);
      v = e.call([&](Graph& g) { return g.relu(m); });
    }
    *last = e.value(v);
  };
  t.check = [chain, last]() -> std::string {
    if (!*last) return "";
    if ((*last)->data != chain->want.data) return "the chain's last value differs from eager's";
    return "";
  };
  t.work.items = static_cast<double>(2 * layers);  // items_per_s: ops per second
  return t;
}

// Time of a configuration's median in this run, if measured.
std::optional<double> median_of(const ModelPoint& pt, const std::string& mode, double overhead) {
  for (const Record* r : pt.run_records)
    if (param_str(r->params, "mode") == mode &&
        std::fabs(param_real(r->params, "overhead_us") - overhead) < 1e-9)
      return r->stats.median;
  return std::nullopt;
}

std::optional<double> ops_of(const ModelPoint& pt) {
  for (const Record* r : pt.run_records) return static_cast<double>(param_int(r->params, "ops"));
  return std::nullopt;
}

const bool registered = register_experiment({
    .id = "ch08/async_frontend",
    .chapter = "08-dataflow",
    .title = "An asynchronous front end hides its own per-op cost behind the kernels until that "
             "cost is the larger: eager vs async against the front end's overhead per op",
    .axes =
        {{.name = "mode", .values = {"eager", "async"}},
         {.name = "overhead_us", .values = {"0", "2", "5", "10", "20", "50"}, .smoke = {"5"}},
         {.name = "ops",
          .values = {"128"},
          .kind = AxisKind::count,
          .max = 1 << 20,
          .smoke = {"8"}},
         {.name = "side", .values = {"64"}, .kind = AxisKind::size, .max = 4096, .smoke = {"8"}}},
    .baseline = {{"mode", "eager"}},
    .interleave = {"mode"},
    .repetitions = 11,
    .warmup = 2,
    .prepare = async_trial,
    .figures = {{.id = "time",
                 .title = "128 ops: time against the front end's own cost per op",
                 .x = "overhead_us",
                 .y = "median",
                 .series = "mode",
                 .y_label = "time for the chain (s)",
                 .x_label = "front end's own time per op, o (µs)",
                 .models = {{.label = "eager: T(o=0) + N o",
                             .series = "eager",
                             .y = [](const ModelPoint& pt) -> std::optional<double> {
                               const auto t0 = median_of(pt, "eager", 0);
                               const auto n = ops_of(pt);
                               if (!t0 || !n) return std::nullopt;
                               return *t0 + (*n + 1) * pt.x * 1e-6;
                             }},
                            {.label = "async: max(T(o=0), N o)",
                             .series = "async",
                             .y = [](const ModelPoint& pt) -> std::optional<double> {
                               const auto t0 = median_of(pt, "eager", 0);
                               const auto n = ops_of(pt);
                               if (!t0 || !n) return std::nullopt;
                               return std::max(*t0, (*n + 1) * pt.x * 1e-6);
                             }}}}},
    .claims = {{.id = "async_hides_front_end",
                // A magnitude: 1 + o/c with o fixed at 5 us and c the machine's kernel time.
                .statement = "With a front end that spends 5 us per op, how many times as fast the "
                             "asynchronous engine runs the chain as eager execution",
                .select = {{"mode", "async"}, {"overhead_us", "5"}},
                .versus = {{"mode", "eager"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
                .unit = "×",
                .min_cpus = 2}},
});

}  // namespace

}  // namespace concurdl::df
