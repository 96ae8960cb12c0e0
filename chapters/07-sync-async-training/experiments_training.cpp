// Chapter 07's experiment: every training mode on Fashion-MNIST, at 1, 2 (and 4) workers, with
// and without a straggler, on both axes of efficiency at once:
//   hardware efficiency     samples/s (the whole run's)
//   statistical efficiency  test accuracy after each epoch, against samples seen and against
//                           wall time, and the time to a target accuracy
// One configuration is one epoch of one mode: each repetition of a mode's group trains it
// once for `epochs` epochs, through the same code as `concurdl train --mode M --ranks N`
// (nn::TrainingMode / the "threads" data-parallel backend), and every epoch's record takes its
// repetition's evaluation. The value is the test accuracy; the named metrics say when and at
// what cost it was reached.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "concurdl/asgd/async_trainer.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::asgd {

namespace {

// Fashion-MNIST, loaded once per process (every group of the experiment uses it).
const data::FashionMnist& fashion_mnist() {
  static std::mutex m;
  static std::unique_ptr<data::FashionMnist> fm;
  std::lock_guard lock(m);
  if (!fm) fm = std::make_unique<data::FashionMnist>(data::load_fashion_mnist());
  return *fm;
}

double straggler_factor(const std::string& s) {
  if (s == "none") return 1.0;
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || std::string(end) != "x" || !(f >= 1 && f <= 100))
    throw UsageError(fmt::format("parameter 'straggler': '{}' is not none or a factor like 4x", s));
  return f;
}

// One training run: after each epoch, its test accuracy and what it cost.
struct EpochPoint {
  double accuracy = 0, loss = 0, elapsed_s = 0, samples_seen = 0;
  std::map<std::string, double> metrics;  // RankTrainer::epoch_metrics()
};
struct RunResult {
  double initial_accuracy = 0;
  std::vector<EpochPoint> epochs;
};

struct Setup {
  std::string mode;
  int workers = 1;
  double straggler = 1.0;
  std::size_t images = 0, test_images = 0, epochs = 1;
  double target = 0.85;
};

RunResult train_once(const Setup& s, const nn::Dataset& train, const nn::Dataset& test) {
  nn::DistributedOptions dist;
  dist.ranks = s.workers;
  dist.backend = "threads";
  dist.mode = s.mode;
  // The straggler is the last worker (worker 0 is the writer: it evaluates and records).
  if (s.straggler > 1.0) dist.stragglers[s.workers - 1] = s.straggler;
  nn::TrainConfig config;  // the train command's defaults: batch 64, lr 0.02, decay 0.8, ...
  config.threads = 1;
  RunResult out;
  const auto loop = [&](nn::RankTrainer& t) {
    const bool writer = t.writer();
    if (writer) out.initial_accuracy = t.evaluate(test).accuracy;
    double elapsed = 0, seen = 0;
    for (std::size_t e = 0; e < s.epochs; ++e) {
      const nn::EpochResult r = t.run_epoch({}, 0);
      elapsed += r.seconds;
      seen += static_cast<double>(r.samples);
      if (!writer) continue;
      const nn::EvalResult ev = t.evaluate(test);
      out.epochs.push_back({ev.accuracy, ev.loss, elapsed, seen, t.epoch_metrics()});
    }
  };
  if (kModes.find(s.mode).mode == Mode::sync) {  // chapter 05's all-reduce, not this trainer
    const nn::DistributedBackend* b = nn::find_distributed_backend("threads");
    if (b == nullptr) throw std::runtime_error("the threads data-parallel backend is missing");
    b->run(dist, config, train, loop);
  } else {
    const nn::TrainingMode* m = nn::find_training_mode(s.mode);
    if (m == nullptr) throw UsageError(fmt::format("parameter 'mode': unknown mode '{}'", s.mode));
    m->run(dist, config, train, loop);
  }
  return out;
}

// Seconds until the test accuracy first reached `target`, interpolated linearly between the
// evaluations (the first one at 0 s, before any step); the whole run's time when it never did.
double time_to(double target, const RunResult& r, bool& reached) {
  double prev_acc = r.initial_accuracy, prev_t = 0;
  for (const EpochPoint& p : r.epochs) {
    if (p.accuracy >= target) {
      reached = true;
      const double f = p.accuracy > prev_acc ? (target - prev_acc) / (p.accuracy - prev_acc) : 1;
      return prev_t + std::clamp(f, 0.0, 1.0) * (p.elapsed_s - prev_t);
    }
    prev_acc = p.accuracy;
    prev_t = p.elapsed_s;
  }
  reached = false;
  return r.epochs.empty() ? 0 : r.epochs.back().elapsed_s;
}

// The runs of one group (one mode, worker count and straggler), shared by its epochs' configs.
struct Runs {
  std::vector<RunResult> runs;
  std::map<std::size_t, std::size_t> calls;  // per epoch: samples taken so far
};

const std::vector<Metric> kMetrics = {
    {"elapsed_s", "s", true, "training time up to this epoch's end (evaluation excluded)"},
    {"samples_seen", "", false, "training samples processed up to this epoch's end"},
    {"samples_per_s", "1/s", false, "the whole run's training samples per second"},
    {"time_to_target_s", "s", true,
     "seconds until the test accuracy first reached the target (interpolated between epochs); "
     "the whole run's time when it never did (reached_target 0)"},
    {"reached_target", "", false, "1 when the run reached the target accuracy, else 0"},
    {"staleness_mean", "", true,
     "updates by other workers between a gradient's pull and its push, averaged over the "
     "epoch's updates (0 for sync and local-sgd: no stale gradients)"},
    {"staleness_max", "", true, "the epoch's largest staleness"}};

Trial training_trial(const Params& p, GroupCache& cache) {
  Setup s;
  s.mode = std::string(kModes.find(p).name);
  s.workers = static_cast<int>(param_int(p, "workers"));
  s.straggler = p.count("straggler") ? straggler_factor(param_str(p, "straggler")) : 1.0;
  s.images = static_cast<std::size_t>(param_int(p, "images"));
  s.test_images = static_cast<std::size_t>(param_int(p, "test_images"));
  s.epochs = static_cast<std::size_t>(param_int(p, "epochs"));
  s.target = param_real(p, "target");
  const auto epoch = static_cast<std::size_t>(param_int(p, "epoch"));
  if (epoch > s.epochs)
    throw UsageError(fmt::format("parameter 'epoch': {} is past the run's {} epochs (epochs=)",
                                 epoch, s.epochs));
  if (static_cast<std::size_t>(s.workers) * 64 > s.images)
    throw UsageError(fmt::format("{} workers of 64 rows need at least {} images (images={})",
                                 s.workers, s.workers * 64, s.images));

  auto runs = std::shared_ptr<Runs>(&cache.get<Runs>("runs", [] { return Runs{}; }),
                                    [](Runs*) {});  // owned by the group's cache
  Trial t;
  t.work.items = 0;
  auto last = std::make_shared<const EpochPoint*>(nullptr);
  auto initial = std::make_shared<double>(0);
  t.measure = [=]() -> Sample {
    const std::size_t i = runs->calls[epoch]++;
    while (runs->runs.size() <= i) {
      const data::FashionMnist& fm = fashion_mnist();
      const nn::Dataset train = nn::to_dataset(fm.train, s.images);
      const nn::Dataset test = nn::to_dataset(fm.test, s.test_images);
      runs->runs.push_back(train_once(s, train, test));
    }
    const RunResult& r = runs->runs[i];
    const EpochPoint& e = r.epochs.at(epoch - 1);
    *last = &e;
    *initial = r.initial_accuracy;
    bool reached = false;
    const double ttt = time_to(s.target, r, reached);
    Sample out(e.accuracy);
    out.metrics["elapsed_s"] = e.elapsed_s;
    out.metrics["samples_seen"] = e.samples_seen;
    out.metrics["samples_per_s"] = r.epochs.back().samples_seen / r.epochs.back().elapsed_s;
    out.metrics["time_to_target_s"] = ttt;
    out.metrics["reached_target"] = reached ? 1 : 0;
    const auto get = [&](const char* k) { return e.metrics.count(k) ? e.metrics.at(k) : 0.0; };
    out.metrics["staleness_mean"] = get("staleness_mean");
    out.metrics["staleness_max"] = get("staleness_max");
    return out;
  };
  // The run must have learnt: a finite loss, and test accuracy at least 0.1 above the untrained
  // model's (about chance, 0.1).
  t.check = [last, initial]() -> std::string {
    if (*last == nullptr) return "";
    const EpochPoint& e = **last;
    if (!std::isfinite(e.loss) || !(e.accuracy >= *initial + 0.1))
      return fmt::format("training did not learn: test accuracy {:.3f} (untrained {:.3f}), loss {}",
                         e.accuracy, *initial, e.loss);
    if (e.metrics.count("workers_lost") && e.metrics.at("workers_lost") > 0)
      return "a worker was lost";
    return "";
  };
  if (static_cast<unsigned>(s.workers) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} workers on {} hardware threads", s.workers, hardware_threads());
  if (s.straggler > 1.0)
    t.notes["straggler"] = fmt::format("worker {} sleeps {}x its compute time after each step",
                                       s.workers - 1, s.straggler - 1);
  return t;
}

std::vector<std::string> epochs_upto(int n) {
  std::vector<std::string> v;
  for (int e = 1; e <= n; ++e) v.push_back(std::to_string(e));
  return v;
}

const bool registered = register_experiment({
    .id = "ch07/training",
    .chapter = "07-sync-async-training",
    .title = "Synchronous vs asynchronous training: test accuracy per epoch, against samples and "
             "against time; samples/s; time to the target accuracy; with and without a straggler",
    .axes = {kModes.axis("ch07/training"),
             {.name = "workers",
              .values = {"1", "2", "4"},
              .quick = {"1", "2"},
              .kind = AxisKind::count,
              .max = kMaxWorkers,
              .smoke = {"2"}},
             {.name = "straggler",
              .values = {"none", "2x", "4x"},
              .quick = {"none", "4x"},
              .check = [](std::string_view s) { straggler_factor(std::string(s)); }},
             {.name = "images",
              .values = {"60000"},
              .quick = {"12000"},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTrain,
              .smoke = {"640"}},
             {.name = "test_images",
              .values = {"10000"},
              .quick = {"2000"},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTest,
              .smoke = {"500"}},
             {.name = "epochs",
              .values = {"10"},
              .quick = {"3"},
              .kind = AxisKind::count,
              .max = 1000,
              .smoke = {"1"}},
             {.name = "target",
              .values = {"0.85"},
              .quick = {"0.8"},
              .kind = AxisKind::real,
              .max = 1,
              .min = 0},
             {.name = "epoch",
              .values = epochs_upto(10),
              .quick = epochs_upto(3),
              .kind = AxisKind::count,
              .max = 1000,
              .smoke = {"1"}}},
    .metric = "test_accuracy",
    .unit = "fraction",
    .lower_is_better = false,
    .metrics = kMetrics,
    // The curves' x: the medians of the repetitions' elapsed time and samples, as derived
    // metrics (a figure's x is an axis or a derived metric).
    .derive =
        [](const Params&, const Work&, Record& r) {
          for (const auto& [metric, x] :
               {std::pair{"elapsed_s", "time_s"}, std::pair{"samples_seen", "samples"}})
            if (const auto it = r.metrics.find(metric); it != r.metrics.end())
              r.derived[x] = it->second.stats.median;
        },
    .scaling_axis = "workers",
    .inapplicable = {{{{"workers", "1"}}, {"straggler"}}},
    .interleave = {"epoch"},
    // Five: the claims compare medians, and each record's interval is that of its median; of
    // two repetitions the median is their mean and the interval no more than [min, max].
    .repetitions = 5,
    .warmup = 0,
    .prepare = training_trial,
    .figures = {{.id = "accuracy_vs_time",
                 .title = "Test accuracy against training time, 2 workers, no straggler",
                 .x = "time_s",
                 .y = "median",
                 .series = "mode",
                 .where = {{"workers", "2"}, {"straggler", "none"}},
                 .y_label = "test accuracy",
                 .x_label = "training time (s)",
                 .along_x = {"epoch"}},
                {.id = "accuracy_vs_samples",
                 .title = "Test accuracy against samples seen, 2 workers, no straggler",
                 .x = "samples",
                 .y = "median",
                 .series = "mode",
                 .where = {{"workers", "2"}, {"straggler", "none"}},
                 .y_label = "test accuracy",
                 .x_label = "training samples seen",
                 .along_x = {"epoch"}},
                {.id = "accuracy_vs_time_straggler",
                 .title = "Test accuracy against training time, 2 workers, one 4x slower",
                 .x = "time_s",
                 .y = "median",
                 .series = "mode",
                 .where = {{"workers", "2"}, {"straggler", "4x"}},
                 .y_label = "test accuracy",
                 .x_label = "training time (s)",
                 .along_x = {"epoch"}},
                {.id = "samples_per_s",
                 .title = "Training samples/s against workers (no straggler)",
                 .x = "workers",
                 .y = "samples_per_s",
                 .series = "mode",
                 .where = {{"epoch", "1"}, {"straggler", "none"}},
                 .y_label = "training samples/s"},
                {.id = "samples_per_s_straggler",
                 .title = "Training samples/s against workers, the last worker 4x slower",
                 .x = "workers",
                 .y = "samples_per_s",
                 .series = "mode",
                 .where = {{"epoch", "1"}, {"straggler", "4x"}},
                 .y_label = "training samples/s"},
                {.id = "time_to_target",
                 .title = "Time to the target test accuracy against workers (no straggler)",
                 .x = "workers",
                 .y = "time_to_target_s",
                 .series = "mode",
                 .where = {{"epoch", "1"}, {"straggler", "none"}},
                 .y_label = "seconds to the target accuracy"},
                {.id = "staleness",
                 .title =
                     "Mean staleness of the gradients (updates between pull and push), epoch 1",
                 .x = "workers",
                 .y = "staleness_mean",
                 .series = "mode",
                 .where = {{"epoch", "1"}}}},
    .derived = {"time_s", "samples"},
    .claims =
        {{.id = "async_outruns_a_straggler",
          // Law by the step model: a synchronous step waits for the slower worker, 4t for 2
          // batches (0.5 / t); asynchronous workers each push at their own pace, 1 / t + 1 / 4t =
          // 1.25 / t: 2.5x. The bound 2 leaves a fifth of it for the server's own work.
          .statement = "With the second of 2 workers 4x slower, the asynchronous parameter server "
                       "trains at least 2x as many samples/s as synchronous all-reduce SGD, which "
                       "waits for the straggler at every step",
          .select = {{"mode", "ps-async"}, {"workers", "2"}, {"straggler", "4x"}, {"epoch", "1"}},
          .field = "samples_per_s",
          .versus = {{"mode", "sync"}},
          .bound = 2.0,
          .unit = "×",
          .min_cpus = 2},
         {.id = "async_reaches_the_target_sooner_beside_a_straggler",
          // A magnitude: samples/s follow the step model above, but how many more samples the
          // stale gradients need to reach the target is the run's, not a model's.
          .statement = "With the second of 2 workers 4x slower, how many times sooner the "
                       "asynchronous parameter server reaches the target test accuracy than "
                       "synchronous SGD (its stale gradients against the waiting)",
          .select = {{"mode", "ps-async"}, {"workers", "2"}, {"straggler", "4x"}, {"epoch", "1"}},
          .field = "time_to_target_s",
          .versus = {{"mode", "sync"}},
          .kind = Claim::Kind::magnitude,
          .causes = {ClaimCause::cores_and_smt, ClaimCause::wakeup_latency},
          .unit = "×",
          .min_cpus = 2},
         {.id = "stale_gradients_cost_little_accuracy",
          // Law: asynchronous SGD with staleness bounded well below sqrt(steps) converges at
          // synchronous SGD's rate (Lian et al., NeurIPS 2015, an asymptotic rate: it says
          // nothing of 3 epochs, which this law tests); here the staleness is about one update. The
          // tolerance is what the test set can resolve (a binomial model the trainers do not
          // share): an accuracy p over n test images has a standard error sqrt(p (1 - p) / n),
          // 0.0084 at p = 0.83 and the quick profile's n = 2000; the difference of two has sqrt(2)
          // times that, 0.012; three of those is 0.036, 4.3% of 0.83: 0.957 (the full profile's
          // 10,000 images resolve more; the bound is the smaller set's).
          .statement = "After the third epoch on 2 workers, the asynchronous parameter server's "
                       "test accuracy is at least 0.957x synchronous SGD's (three standard errors "
                       "of the difference over 2,000 test images): staleness of about one update "
                       "costs little here",
          .select = {{"mode", "ps-async"}, {"workers", "2"}, {"straggler", "none"}, {"epoch", "3"}},
          .versus = {{"mode", "sync"}},
          .bound = 0.957,
          .unit = "×",
          .min_cpus = 2}},
});

}  // namespace

}  // namespace concurdl::asgd
