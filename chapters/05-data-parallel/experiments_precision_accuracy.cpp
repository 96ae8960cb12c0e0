// Chapter 05's mixed-precision accuracy experiment (precision.hpp):
//   ch05/precision_accuracy  one trainer (nn::Trainer, 1 compute thread) per precision on
//                            Fashion-MNIST for 10 epochs (3 on 12000 images in the quick
//                            profile): test accuracy after each epoch, with the steps skipped
//                            for overflow and fp16's loss scale.
// Its speed and traffic, ch05/precision, register in experiments_precision.cpp.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/trainer.hpp"
#include "precision_trials.hpp"

namespace concurdl::dp {

namespace {

using namespace precision_trials;

const std::vector<Metric> kAccuracyMetrics = {
    {"samples_per_s", "1/s", false, "the whole run's training samples per second"},
    {"skipped_steps", "", true, "steps skipped for non-finite gradients, up to this epoch"},
    {"loss_scale", "", false, "fp16's dynamic loss scale at this epoch's end (1 otherwise)"},
    {"test_loss", "", true, "mean cross-entropy on the test images"}};

struct EpochAt {
  double accuracy = 0, loss = 0, skipped = 0, scale = 1;
};
struct AccuracyRun {
  double initial = 0, samples_per_s = 0;
  std::vector<EpochAt> epochs;
};
struct AccuracyRuns {
  std::vector<AccuracyRun> runs;
  std::map<std::size_t, std::size_t> calls;  // per epoch: repetitions taken so far
};

const data::FashionMnist& fashion_mnist() {
  static const data::FashionMnist fm = data::load_fashion_mnist();
  return fm;
}

AccuracyRun train_precision(nn::Precision p, std::size_t images, std::size_t test_images,
                            std::size_t epochs) {
  const nn::Dataset train = nn::to_dataset(fashion_mnist().train, images);
  const nn::Dataset test = nn::to_dataset(fashion_mnist().test, test_images);
  nn::TrainConfig config;  // the train command's: batch 64, lr 0.02, momentum 0.9, decay 0.8
  config.threads = 1;
  config.precision = p;
  kernels::ComputeThreadsScope one(1);
  nn::Trainer t(config, train);
  AccuracyRun run;
  run.initial = t.evaluate(test).accuracy;
  double seconds = 0, skipped = 0;
  for (std::size_t e = 0; e < epochs; ++e) {
    const nn::EpochResult r = t.run_epoch({}, 0);
    seconds += r.seconds;
    skipped += static_cast<double>(r.skipped_steps);
    const nn::EvalResult ev = t.evaluate(test);
    run.epochs.push_back({ev.accuracy, ev.loss, skipped, t.loss_scaler().scale()});
  }
  run.samples_per_s = static_cast<double>(train.n * epochs) / seconds;
  if (p != nn::Precision::fp16)
    for (EpochAt& e : run.epochs) e.scale = 1;
  return run;
}

Trial accuracy_trial(const Params& p, GroupCache& cache) {
  const nn::Precision precision = precision_of(p);
  const auto images = static_cast<std::size_t>(param_int(p, "images"));
  const auto test_images = static_cast<std::size_t>(param_int(p, "test_images"));
  const auto epochs = static_cast<std::size_t>(param_int(p, "epochs"));
  const auto epoch = static_cast<std::size_t>(param_int(p, "epoch"));
  if (epoch > epochs)
    throw UsageError(
        fmt::format("parameter 'epoch': {} is past the run's {} epochs (epochs=)", epoch, epochs));
  if (images < kRows)
    throw UsageError(
        fmt::format("parameter 'images': {} is less than a batch of {}", images, kRows));
  auto runs = std::shared_ptr<AccuracyRuns>(
      &cache.get<AccuracyRuns>("runs", [] { return AccuracyRuns{}; }), [](AccuracyRuns*) {});
  Trial t;
  t.work.items = 0;
  auto last = std::make_shared<const AccuracyRun*>(nullptr);
  t.measure = [=]() -> Sample {
    const std::size_t i = runs->calls[epoch]++;
    while (runs->runs.size() <= i)
      runs->runs.push_back(train_precision(precision, images, test_images, epochs));
    const AccuracyRun& r = runs->runs[i];
    *last = &r;
    const EpochAt& e = r.epochs.at(epoch - 1);
    Sample out(e.accuracy);
    out.metrics["samples_per_s"] = r.samples_per_s;
    out.metrics["skipped_steps"] = e.skipped;
    out.metrics["loss_scale"] = e.scale;
    out.metrics["test_loss"] = e.loss;
    return out;
  };
  t.check = [last, epoch]() -> std::string {
    if (*last == nullptr) return "";
    const EpochAt& e = (*last)->epochs.at(epoch - 1);
    if (!std::isfinite(e.loss) || !(e.accuracy >= (*last)->initial + 0.1))
      return fmt::format("training did not learn: test accuracy {:.3f} (untrained {:.3f}), loss {}",
                         e.accuracy, (*last)->initial, e.loss);
    return "";
  };
  t.notes["precision_compute"] = nn::precision_compute(precision);
  return t;
}

std::vector<std::string> epochs_upto(int n) {
  std::vector<std::string> v;
  for (int e = 1; e <= n; ++e) v.push_back(std::to_string(e));
  return v;
}

std::vector<Claim> precision_accuracy_claims() {
  return {{.id = "bf16_accuracy_as_fp32",
           // Law: mixed precision with float32 master weights trains to float32's
           // accuracy (Micikevicius et al. 2018; bfloat16: Kalamkar et al. 2019). The
           // tolerance is what the test set can resolve, a binomial model the trainer
           // does not share: an accuracy p over n = 10,000 test images has a standard
           // error sqrt(p (1 - p) / n), 0.0031 at p = 0.89; the difference of two has
           // sqrt(2) times that, 0.0044; three of those is 0.013, 1.5% of 0.89: 0.985.
           // Both accuracies are scored on the same images, so a paired test (McNemar's,
           // on the images the two classify differently) would resolve less; the run
           // keeps no per-image verdicts, and the independent model is the looser one.
           // Training-seed variation, which one seed does not show, is not modelled.
           .statement = "After 10 epochs, bfloat16 training's test accuracy is within "
                        "1.5% of float32's, three standard errors of the difference over "
                        "the 10,000 test images (bf16's accuracy over fp32's)",
           .select = {{"precision", "bf16"}, {"epoch", "10"}},
           .versus = {{"precision", "fp32"}},
           .bound = 0.985,
           .unit = "×",
           .timing = false},
          {.id = "fp16_accuracy_as_fp32",
           // Law: with a dynamic loss scale, FP16's 11 significant bits train to
           // float32's accuracy (Micikevicius et al. 2018); the tolerance of
           // bf16_accuracy_as_fp32.
           .statement = "After 10 epochs, fp16 training with a dynamic loss scale reaches "
                        "a test accuracy within 1.5% of float32's (three standard errors "
                        "of the difference)",
           .select = {{"precision", "fp16"}, {"epoch", "10"}},
           .versus = {{"precision", "fp32"}},
           .bound = 0.985,
           .unit = "×",
           .timing = false}};
}

Experiment precision_accuracy_experiment() {
  return {
      .id = "ch05/precision_accuracy",
      .chapter = "05-data-parallel",
      .title =
          "Mixed precision's test accuracy: fp32, bf16 and fp16 training on Fashion-MNIST, "
          "epoch by epoch",
      .axes = {precision_axis(),
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
               {.name = "epoch",
                .values = epochs_upto(10),
                .quick = epochs_upto(3),
                .kind = AxisKind::count,
                .max = 1000,
                .smoke = {"1"}}},
      .baseline = {{"precision", "fp32"}},
      .metric = "test_accuracy",
      .unit = "fraction",
      .lower_is_better = false,
      .metrics = kAccuracyMetrics,
      .scaling_axis = "",
      .interleave = {"epoch"},
      // The runs are deterministic (one thread, a fixed seed): two repetitions show it.
      .repetitions = 2,
      .warmup = 0,
      .prepare = accuracy_trial,
      .figures = {{.id = "accuracy",
                   .title = "Test accuracy after each epoch, by precision",
                   .x = "epoch",
                   .y = "median",
                   .series = "precision",
                   .y_label = "test accuracy"}},
      .claims = precision_accuracy_claims(),
  };
}

const bool registered = [] {
  register_experiment(precision_accuracy_experiment());
  return true;
}();

}  // namespace

}  // namespace concurdl::dp
