// ch08/mlp_train: the MLP trained on Fashion-MNIST batches by kernels/nn (forward_backward, then
// SGD) and by its recorded graph (GraphTrainer) under each executor, at the same thread counts,
// the graph run as recorded (fusion none: bias, ReLU and ReLU' nodes of their own) and with its
// epilogues fused (fusion epilogues: in the GEMMs, as nn does). Samples per second; after timing,
// every configuration's parameters are checked against nn's own training on the same batches
// from the same start.
//
// What `threads` means per executor (each uses that many threads in its own way):
//   nn, sequential       intra-op: every kernel on `threads` threads, one op after another
//   parallel, tbb_flow   inter-op: `threads` executor threads, each kernel on one
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/mlp_graph.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::df {

namespace {

constexpr std::uint64_t kSeed = 1;

// The first `n` training images, loaded once per process.
std::shared_ptr<const nn::Dataset> training_rows(std::size_t n) {
  static std::mutex m;
  static std::shared_ptr<const nn::Dataset> kept;
  std::lock_guard lock(m);
  if (!kept || kept->n < n)
    kept = std::make_shared<const nn::Dataset>(
        nn::to_dataset(data::load_fashion_mnist().train, std::max<std::size_t>(n, 4096)));
  return kept;
}

struct Run {
  std::unique_ptr<nn::Mlp> model;
  std::unique_ptr<nn::Sgd> sgd;    // executor nn
  std::unique_ptr<Executor> exec;  // the graph executors
  std::unique_ptr<GraphTrainer> trainer;
  std::vector<float> initial;  // the parameters a repetition starts from
};

Trial mlp_train_trial(const Params& p, GroupCache& cache) {
  const std::string name = param_str(p, "executor");
  const bool graph = name != "nn";
  const Fusion fusion = graph ? kFusions.find(p).fusion : Fusion::epilogues;
  const int threads = static_cast<int>(param_int(p, "threads"));
  const auto batch = static_cast<std::size_t>(param_int(p, "batch"));
  const auto steps = static_cast<std::size_t>(param_int(p, "steps"));
  if (batch * steps > data::kFashionMnistTrain)
    throw UsageError(fmt::format("batch x steps = {} rows: Fashion-MNIST has {} training images",
                                 batch * steps, data::kFashionMnistTrain));
  const auto data = training_rows(batch * steps);
  // nn's own training on these batches from the same start, once per group: what every
  // configuration's parameters must come to.
  const auto& want = cache.get<std::vector<float>>("nn parameters", [&] {
    kernels::ComputeThreadsScope one(1);
    nn::Mlp model(nn::MlpSpec{}, kSeed);
    nn::Sgd sgd(model.parameters().size(), {});
    for (std::size_t s = 0; s < steps; ++s) {
      model.forward_backward(data->row(s * batch), data->y.data() + s * batch, batch);
      sgd.step(model.parameters(), model.gradients());
    }
    return std::vector<float>(model.parameters().begin(), model.parameters().end());
  });
  auto run = std::make_shared<Run>();
  run->model = std::make_unique<nn::Mlp>(nn::MlpSpec{}, kSeed);
  run->initial.assign(run->model->parameters().begin(), run->model->parameters().end());
  // nn and an executor that runs a node at a time give the threads to the kernels (intra-op);
  // the others to the executor's workers (inter-op).
  bool intra_op = !graph;
  if (graph) {
    const ExecutorKind* kind = executor_kinds().lookup(name);
    if (!kind)
      throw UsageError(fmt::format(
          "parameter 'executor': '{}' is not nn, sequential, parallel or tbb_flow", name));
    intra_op = kind->threads == Threads::intra_op;
    run->exec = kind->make(intra_op ? 1 : threads);
  }
  const int intra = intra_op ? threads : 1;
  Trial t;
  t.reset = [run, graph, batch, intra, fusion] {  // every repetition trains from the same start
    // OpenBLAS's workers spin for about 0.1 s after a call on several threads: wait them out
    // (untimed) before an executor's own threads run, and the other way round.
    kernels::settle_runtime(intra > 1 ? kernels::ThreadRuntime::openblas
                                      : kernels::ThreadRuntime::pool);
    std::copy(run->initial.begin(), run->initial.end(), run->model->parameters().begin());
    const std::size_t n = run->model->parameters().size();
    if (graph) {
      run->trainer =
          std::make_unique<GraphTrainer>(*run->model, batch, *run->exec, nn::SgdOptions{}, fusion);
    } else {
      run->sgd = std::make_unique<nn::Sgd>(n, nn::SgdOptions{});
    }
  };
  t.run = [run, data, graph, batch, steps, intra] {
    kernels::ComputeThreadsScope scope(intra);
    for (std::size_t s = 0; s < steps; ++s) {
      const float* x = data->row(s * batch);
      const std::uint8_t* y = data->y.data() + s * batch;
      if (graph) {
        run->trainer->step(x, y);
      } else {
        run->model->forward_backward(x, y, batch);
        run->sgd->step(run->model->parameters(), run->model->gradients());
      }
    }
  };
  t.check = [run, &want]() -> std::string {
    const auto got = run->model->parameters();
    std::size_t worst = 0;
    double worst_err = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i]));
      if (!(err <= worst_err)) {  // NaN counts as worst
        worst_err = std::isnan(err) ? INFINITY : err;
        worst = i;
      }
    }
    if (worst_err > 1e-4)
      return fmt::format("parameter {} is {} after training, nn's own training gives {}", worst,
                         got[worst], want[worst]);
    return "";
  };
  t.work.items = static_cast<double>(batch * steps);  // items_per_s: samples per second
  if (static_cast<unsigned>(threads) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} threads on {} hardware threads", threads, hardware_threads());
  return t;
}

// The executor axis: kernels/nn's own trainer, then every executor of the table.
std::vector<std::string> nn_then_executors() {
  std::vector<std::string> out = {"nn"};
  for (const std::string& name : executor_kinds().names()) out.push_back(name);
  return out;
}

const bool registered = register_experiment({
    .id = "ch08/mlp_train",
    .chapter = "08-dataflow",
    .title = "Training the MLP on Fashion-MNIST: kernels/nn vs its recorded graph under each "
             "executor, with and without its epilogues fused, samples per second at the same "
             "threads",
    .axes =
        {{.name = "executor", .values = nn_then_executors()},
         {.name = "threads",
          .values = {"1", "2", "4"},
          .quick = {"1", "2"},
          .kind = AxisKind::count,
          .max = kMaxThreads,
          .smoke = {"2"}},
         // The experiment's one documented variant axis is the executor's; the fusions' rows
         // (mlp_graph.hpp) give this one its values.
         {.name = "fusion", .values = kFusions.names(Offer::all)},
         {.name = "batch", .values = {"64"}, .kind = AxisKind::size, .max = 60000, .smoke = {"8"}},
         {.name = "steps",
          .values = {"20"},
          .kind = AxisKind::count,
          .max = 60000,
          .smoke = {"2"}}},
    .baseline = {{"executor", "nn"}},
    .scaling_axis = "threads",
    .inapplicable = {{{{"executor", "nn"}}, {"fusion"}}},  // nn's epilogues are always fused
    // Not interleaved: each change between OpenBLAS's threads and the executors' waits 0.25 s
    // for OpenBLAS's spinning workers to sleep (settle_runtime), once per configuration.
    .repetitions = 11,
    .warmup = 1,
    .prepare = mlp_train_trial,
    .figures = {{.id = "samples",
                 .title = "Samples per second training the MLP (784-256-128-10, batches of 64)",
                 .kind = FigureKind::bars,
                 .x = "threads",
                 .y = "items_per_s",
                 .series = "executor",
                 .y_label = "samples/s"}},
    .claims =
        {{.id = "graph_training_near_nn",
          // Magnitude: with its epilogues fused the graph runs nn's kernels and differs from nn
          // in copying its variables into tensors of its own at each step (the parameters, 235K
          // floats, and the batch, 50K: 1.14 MB read and written), which costs what the
          // machine's memory bandwidth makes it against a step's GEMMs.
          .statement =
              "Training on the recorded graph with its epilogues fused (sequential executor, one "
              "thread): how many times the samples a second of kernels/nn on one thread, the same "
              "GEMMs plus a copy of the variables each step",
          .select = {{"executor", "sequential"}, {"threads", "1"}, {"fusion", "epilogues"}},
          .versus = {{"executor", "nn"}},
          .kind = Claim::Kind::magnitude,
          .causes = {ClaimCause::memory_bandwidth, ClaimCause::caches},
          .unit = "×"},
         {.id = "epilogue_fusion_pays",
          // Magnitude: what fusing saves is passes over the activations (64 x 256 floats and
          // smaller, in L2 on every machine here), a few percent of a step whose GEMMs dominate:
          // near 1, its size set by the caches.
          .statement = "How many samples a second the graph with its epilogues fused trains "
                       "against the same graph as recorded (bias, ReLU and ReLU' nodes of their "
                       "own), sequential executor, one thread",
          .select = {{"executor", "sequential"}, {"threads", "1"}, {"fusion", "epilogues"}},
          .versus = {{"fusion", "none"}},
          .kind = Claim::Kind::magnitude,
          .causes = {ClaimCause::caches, ClaimCause::memory_bandwidth},
          .unit = "×"}},
});

}  // namespace

}  // namespace concurdl::df
