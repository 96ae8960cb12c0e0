// Chapter 08's experiments on executors:
//   ch08/executors  one run of a graph of GEMM + ReLU nodes by each executor, at 1, 2, 4
//                   threads: `wide` (independent chains summed at the end: inter-op
//                   parallelism to find), `deep` (one chain: none) and `mlp` (the MLP's
//                   forward and backward, record_mlp); sequential is the
//                   baseline, oneTBB's flow graph the peer. Every GEMM runs on one thread
//                   (intra-op 1), so the threads are the executor's.
//   ch08/inter_intra  wide, deep and MLP-shaped graphs with their threads split between the
//                   executor (inter-op) and each kernel (intra-op): 1x1, 1x2, 2x1, 2x2.
// Both check their results after timing against a sequential computation.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/fusion.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/df/mlp_graph.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/threads.hpp"
#include "experiment_graphs.hpp"

namespace concurdl::df {

namespace {

constexpr std::int64_t kMaxSide = 4096;
constexpr std::int64_t kMaxNodes = 1 << 16;

// The MLP's forward and backward as a graph (784-256-128-10, its parameters from seed 1), on a
// batch of `rows` pseudo-random rows: the shape of a training step without the optimiser.
struct MlpShape {
  std::unique_ptr<nn::Mlp> model;
  std::vector<float> x;
  std::vector<std::uint8_t> labels;
  MlpGraph graph;
};

// A graph of the experiments and its last node's value, computed sequentially on one thread:
// wide, deep (make_graph) or mlp (side = the batch's rows).
struct GraphCase {
  std::shared_ptr<MlpShape> mlp;  // graph=mlp
  Graph graph;                    // the others
  Tensor want;
  const Graph& g() const { return mlp ? mlp->graph.graph : graph; }
};

GraphCase make_case(const std::string& shape, std::size_t side, std::size_t width,
                    std::size_t depth) {
  GraphCase c;
  if (shape == "mlp") {
    c.mlp = std::make_shared<MlpShape>();
    c.mlp->model = std::make_unique<nn::Mlp>(nn::MlpSpec{}, 1);
    c.mlp->x = pseudo_random(side, nn::MlpSpec{}.widths[0], 5).data;
    for (std::size_t i = 0; i < side; ++i)
      c.mlp->labels.push_back(static_cast<std::uint8_t>(i % 10));
    c.mlp->graph = record_mlp(*c.mlp->model, c.mlp->x.data(), c.mlp->labels.data(), side);
  } else if (shape == "wide" || shape == "deep") {
    c.graph = make_graph(shape, side, width, depth);
  } else {
    throw UsageError(fmt::format("parameter 'graph': '{}' is not wide, deep or mlp", shape));
  }
  kernels::ComputeThreadsScope one(1);
  c.want = SequentialExecutor().run(c.g()).back();
  return c;
}

Trial executor_trial(const Params& p, GroupCache& cache) {
  const std::string shape = param_str(p, "graph");
  const std::string name = param_str(p, "executor");
  const int threads = has_param(p, "threads") ? static_cast<int>(param_int(p, "threads")) : 1;
  const auto side = static_cast<std::size_t>(param_int(p, "side"));
  const auto width = static_cast<std::size_t>(param_int(p, "width"));
  const auto depth = static_cast<std::size_t>(param_int(p, "depth"));
  auto exec = std::shared_ptr<Executor>(executor_kinds().find(name).make(threads));
  auto shared = std::shared_ptr<GraphCase>(
      &cache.get<GraphCase>("graph", [&] { return make_case(shape, side, width, depth); }),
      [](GraphCase*) {});
  auto last = std::make_shared<const Tensor*>(nullptr);
  Trial t;
  t.run = [exec, shared, last] {
    kernels::ComputeThreadsScope one(1);  // intra-op 1: the executor's threads are the parallelism
    *last = &exec->run(shared->g()).back();
  };
  t.check = [shared, last]() -> std::string {
    if (*last != nullptr && (*last)->data != shared->want.data)
      return "the graph's last value differs from the sequential executor's";
    return "";
  };
  t.work.items = static_cast<double>(shared->g().size());
  if (shape != "mlp") t.work.flops = 2.0 * static_cast<double>(side * side * side * width * depth);
  if (static_cast<unsigned>(threads) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} threads on {} hardware threads", threads, hardware_threads());
  return t;
}

const bool registered_executors = register_experiment({
    .id = "ch08/executors",
    .chapter = "08-dataflow",
    .title = "Graph executors: sequential, parallel (dependency counts on the stealing pool) and "
             "oneTBB's flow graph, on wide and deep graphs of GEMM + ReLU nodes",
    .axes = {{.name = "graph", .values = {"wide", "deep", "mlp"}},
             executor_kinds().axis("ch08/executors"),
             {.name = "threads",
              .values = {"1", "2", "4"},
              .kind = AxisKind::count,
              .max = kMaxThreads,
              .smoke = {"2"}},
             {.name = "side",
              .values = {"96"},
              .kind = AxisKind::size,
              .max = kMaxSide,
              .smoke = {"8"}},
             {.name = "width",
              .values = {"16"},
              .kind = AxisKind::count,
              .max = kMaxNodes,
              .smoke = {"4"}},
             {.name = "depth",
              .values = {"4"},
              .kind = AxisKind::count,
              .max = kMaxNodes,
              .smoke = {"2"}}},
    .baseline = {{"executor", "sequential"}},
    .scaling_axis = "threads",
    .inapplicable = {{{{"executor", "sequential"}}, {"threads"}}},
    .interleave = {"executor", "threads"},
    .repetitions = 15,
    .warmup = 2,
    .prepare = executor_trial,
    .figures = {{.id = "wide",
                 .title = "Wide graph (16 independent chains): time per run against threads",
                 .x = "threads",
                 .y = "median",
                 .series = "executor",
                 .where = {{"graph", "wide"}},
                 .y_label = "time per graph run (s)"},
                {.id = "speedup",
                 .title = "Speedup over the sequential executor",
                 .kind = FigureKind::speedup,
                 .x = "threads",
                 .series = "executor",
                 .where = {{"graph", "wide"}}},
                {.id = "deep",
                 .title = "Deep graph (one chain): time per run against threads",
                 .x = "threads",
                 .y = "median",
                 .series = "executor",
                 .where = {{"graph", "deep"}},
                 .y_label = "time per graph run (s)"},
                {.id = "mlp",
                 .title = "The MLP's forward and backward (96 rows): time per run against threads",
                 .x = "threads",
                 .y = "median",
                 .series = "executor",
                 .where = {{"graph", "mlp"}},
                 .y_label = "time per graph run (s)"}},
    .claims = {{.id = "parallel_near_tbb_flow",
                // Magnitude: against oneTBB's flow graph (0.98-1.12x over the committed runs).
                .statement =
                    "On the wide graph at 2 threads, how fast the parallel executor (dependency "
                    "counts on chapter 01's stealing pool) runs against oneTBB's flow graph",
                .select = {{"graph", "wide"}, {"executor", "parallel"}, {"threads", "2"}},
                .versus = {{"executor", "tbb_flow"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::peer_kernels, ClaimCause::wakeup_latency},
                .unit = "×",
                .min_cpus = 2},
               {.id = "parallel_speeds_up_wide",
                // A magnitude: how much of the second vCPU the host gives (1.2-1.75x on the
                // committed guests).
                .statement = "On the wide graph, the parallel executor's speed at 2 threads over "
                             "the sequential executor's",
                .select = {{"graph", "wide"}, {"executor", "parallel"}, {"threads", "2"}},
                .field = "speedup",
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
                .unit = "×",
                .min_cpus = 2}},
});

// ---- ch08/inter_intra -------------------------------------------------------------------------

// "2x1": 2 inter-op threads (the executor's), 1 intra-op thread (each kernel's).
std::pair<int, int> parse_split(const std::string& s) {
  const auto x = s.find('x');
  int inter = 0, intra = 0;
  try {
    if (x != std::string::npos) {
      inter = std::stoi(s.substr(0, x));
      intra = std::stoi(s.substr(x + 1));
    }
  } catch (const std::exception&) {
    inter = 0;
  }
  if (inter < 1 || intra < 1 || inter > kMaxThreads || intra > kMaxThreads ||
      s != fmt::format("{}x{}", inter, intra))
    throw UsageError(fmt::format(
        "parameter 'split': '{}' is not INTERxINTRA (threads of the executor x threads of each "
        "kernel, e.g. 2x1)",
        s));
  return {inter, intra};
}

Trial inter_intra_trial(const Params& p, GroupCache& cache) {
  const std::string shape = param_str(p, "graph");
  const auto split = parse_split(param_str(p, "split"));
  const int inter = split.first,
            intra = split.second;  // not a structured binding: clang 14 cannot capture one
  const auto side = static_cast<std::size_t>(param_int(p, "side"));
  auto shared = std::shared_ptr<GraphCase>(
      &cache.get<GraphCase>("graph", [&] { return make_case(shape, side, 16, 4); }),
      [](GraphCase*) {});
  auto exec =
      std::shared_ptr<Executor>(make_executor(inter == 1 ? "sequential" : "parallel", inter));
  auto last = std::make_shared<const Tensor*>(nullptr);
  Trial t;
  // OpenBLAS's workers spin for about 0.1 s after a call on several threads; an executor's
  // threads measured right after would share the cores with them. Between configurations that
  // change who runs the threads, wait them out (untimed).
  t.reset = [intra] {
    kernels::settle_runtime(intra > 1 ? kernels::ThreadRuntime::openblas
                                      : kernels::ThreadRuntime::pool);
  };
  t.run = [exec, shared, last, intra] {
    kernels::ComputeThreadsScope scope(intra);
    *last = &exec->run(shared->g()).back();
  };
  t.check = [shared, last]() -> std::string {
    if (*last == nullptr) return "";
    const auto& got = (*last)->data;
    const auto& want = shared->want.data;
    if (got.size() != want.size()) return "the graph's last value has the wrong size";
    for (std::size_t i = 0; i < got.size(); ++i)  // kernels split across threads may round apart
      if (std::fabs(got[i] - want[i]) > 1e-3f * (1.0f + std::fabs(want[i])))
        return fmt::format("element {} of the last value is {}, one thread gives {}", i, got[i],
                           want[i]);
    return "";
  };
  t.work.items = static_cast<double>(shared->g().size());
  if (static_cast<unsigned>(inter * intra) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} x {} threads on {} hardware threads", inter, intra, hardware_threads());
  return t;
}

const bool registered_inter_intra = register_experiment({
    .id = "ch08/inter_intra",
    .chapter = "08-dataflow",
    .title = "Inter-op vs intra-op threads (TensorFlow's two pool sizes): the same graphs with the "
             "threads given to the executor, to each kernel, or both",
    .axes = {{.name = "graph", .values = {"wide", "deep", "mlp"}},
             {.name = "split", .values = {"1x1", "1x2", "2x1", "2x2"}, .smoke = {"2x1"}},
             // wide/deep: the matrices' side; mlp: the batch's rows
             {.name = "side",
              .values = {"192"},
              .kind = AxisKind::size,
              .max = kMaxSide,
              .smoke = {"16"}}},
    .baseline = {{"split", "1x1"}},
    // Not interleaved: each change between OpenBLAS's threads and the executor's waits 0.25 s
    // for OpenBLAS's spinning workers to sleep (settle_runtime), once per configuration.
    .repetitions = 11,
    .warmup = 2,
    .prepare = inter_intra_trial,
    .figures = {{.id = "speedup",
                 .title = "Speedup over one thread, by graph and split (inter-op x intra-op)",
                 .kind = FigureKind::bars,
                 .x = "graph",
                 .y = "speedup",
                 .series = "split",
                 .y_label = "speedup over 1x1"}},
    .claims = {{.id = "wide_wants_inter_op",
                // A magnitude: OpenBLAS's threading of small GEMMs against the executor's on each
                // machine.
                .statement =
                    "On the wide graph, 2 inter-op threads (2x1) over 2 intra-op threads (1x2)",
                .select = {{"graph", "wide"}, {"split", "2x1"}},
                .versus = {{"split", "1x2"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::peer_kernels},
                .unit = "×",
                .min_cpus = 2},
               {.id = "deep_gains_nothing_from_inter_op",
                // Law by the graph: a chain has no two nodes ready at once, so a second inter-op
                // thread can only add its hand-offs (speedup at most 1; 1.1 leaves the run's
                // spread). An executor that ignored its second thread would pass too, so it is
                // judged only where the same executor, in the same run, is seen running the wide
                // graph's independent nodes at once (its 2x1 speedup at least 1.2).
                .statement = "On the deep graph (one chain) 2 inter-op threads (2x1) gain nothing "
                             "over one thread (at most 1.1x): no two of its nodes can run at once",
                .select = {{"graph", "deep"}, {"split", "2x1"}},
                .field = "speedup",
                .compare = Claim::Compare::at_most,
                .bound = 1.1,
                .unit = "×",
                .min_cpus = 2,
                .control =
                    Claim::Control{
                        .select = {{"graph", "wide"}, {"split", "2x1"}},
                        .field = "speedup",
                        .bound = 1.2,
                        .shows = "the inter-op executor runs the wide graph's nodes at once"}}},
});

}  // namespace

}  // namespace concurdl::df
