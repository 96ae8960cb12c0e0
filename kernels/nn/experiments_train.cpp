// The training stack's entries in the harness:
//   kernels/train             the curve `concurdl train` records (not measured by `run`): test
//                             accuracy and loss against epochs and against training time
//   kernels/train_throughput  training samples/s against threads, with OpenBLAS and with the
//                             suite's own GEMM v4, on the first images of Fashion-MNIST, the
//                             same step in bfloat16 and FP16 (rows bf16, fp16), and PyTorch's
//                             plain loop on the same model, batch and data as a peer row where
//                             the interpreters named have torch (torch_peer.hpp): eager,
//                             compiled and under torch.autocast(bfloat16)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/stats.hpp"
#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/torch_peer.hpp"
#include "concurdl/nn/trainer.hpp"
#include "own_peak.hpp"
#include "train_record.hpp"

namespace concurdl::nn {

namespace {

// Hyperparameters are floats: their shortest text is the float's ("0.02"), not that of the
// double it widens to ("0.019999999552965164"), and the recorded number is that text's value.
std::string num(float v) { return fmt::format("{}", v); }
double shortest(float v) { return std::stod(num(v)); }

Params curve_params(const TrainRecordContext& c, std::size_t epoch) {
  Params p = {{"arch", c.config.spec.describe()},
              {"batch", std::to_string(c.config.batch)},
              {"lr", num(c.config.sgd.lr)},
              {"lr_decay", num(c.config.lr_decay)},
              {"momentum", num(c.config.sgd.momentum)},
              {"weight_decay", num(c.config.sgd.weight_decay)},
              {"threads", std::to_string(c.config.threads)},
              {"seed", std::to_string(c.config.seed)},
              {"gemm", std::string(kernels::gemm_version_name(c.config.gemm))},
              {"precision", std::string(describe(c.config.precision))},
              {"train_samples", std::to_string(c.train_samples)},
              {"epoch", std::to_string(epoch)}};
  if (!c.moe.empty()) p["moe"] = c.moe;
  return p;
}

// FLOPs of one training sample through the GEMMs: forward 2*in*out per layer; backward the
// weight gradient (2*in*out) and the input gradient (2*in*out, not needed for the first layer).
// Element-wise work (bias, ReLU, softmax) is O(widths) and left out.
double training_flops_per_sample(const MlpSpec& s) {
  double f = 0;
  for (std::size_t l = 0; l + 1 < s.widths.size(); ++l) {
    const double io = static_cast<double>(s.widths[l]) * static_cast<double>(s.widths[l + 1]);
    f += 2 * io * (l == 0 ? 2 : 3);
  }
  return f;
}

}  // namespace

Record curve_record(const TrainRecordContext& c, std::size_t epoch, const EvalResult& test,
                    const EpochResult* r, double elapsed_s, std::uint64_t step) {
  Record rec;
  rec.experiment = kTrainExperiment;
  rec.chapter = "kernels";
  rec.params = curve_params(c, epoch);
  rec.metric = "test_accuracy";
  rec.unit = "fraction";
  rec.lower_is_better = false;
  rec.samples = {test.accuracy};
  rec.stats = summarize(rec.samples);
  rec.derived["test_loss"] = test.loss;
  rec.derived["elapsed_s"] = elapsed_s;
  rec.derived["step"] = static_cast<double>(step);
  if (r) {
    rec.derived["train_loss"] = r->loss;
    rec.derived["train_accuracy"] = r->accuracy;
    if (r->seconds > 0) rec.derived["samples_per_s"] = static_cast<double>(r->samples) / r->seconds;
    if (c.config.precision != Precision::fp32)
      rec.derived["skipped_steps"] = static_cast<double>(r->skipped_steps);
  }
  return rec;
}

nlohmann::json training_provenance(const TrainRecordContext& c, const std::filesystem::path& data,
                                   const std::string& resumed_from, const std::string& checkpoint) {
  nlohmann::json j = {{"arch", c.config.spec.describe()},
                      {"batch", c.config.batch},
                      {"lr", shortest(c.config.sgd.lr)},
                      {"lr_decay", shortest(c.config.lr_decay)},
                      {"momentum", shortest(c.config.sgd.momentum)},
                      {"weight_decay", shortest(c.config.sgd.weight_decay)},
                      {"seed", c.config.seed},
                      {"threads", c.config.threads},
                      {"gemm", std::string(kernels::gemm_version_name(c.config.gemm))},
                      {"precision", std::string(describe(c.config.precision))},
                      {"precision_compute", precision_compute(c.config.precision)},
                      {"train_samples", c.train_samples},
                      {"test_samples", c.test_samples},
                      {"data", std::filesystem::absolute(data).string()},
                      {"flops_per_training_sample", training_flops_per_sample(c.config.spec)}};
  if (!c.moe.empty()) j["moe"] = c.moe;
  if (!resumed_from.empty()) j["resumed_from"] = std::filesystem::absolute(resumed_from).string();
  if (!checkpoint.empty()) j["checkpoint"] = std::filesystem::absolute(checkpoint).string();
  return j;
}

namespace {

const bool registered_curve = register_experiment({
    .id = kTrainExperiment,
    .chapter = "kernels",
    .title = "Training the MLP on Fashion-MNIST: test accuracy and loss per epoch (concurdl train)",
    // Declared for the record's vocabulary; `concurdl train` sets them from its flags.
    // The limits are those of the command's flags (train_command.cpp).
    .axes = {{.name = "arch", .values = {MlpSpec{}.describe()}},
             {.name = "batch",
              .values = {"64"},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTrain},
             {.name = "threads", .values = {"1"}, .kind = AxisKind::count, .max = kMaxThreads},
             {.name = "seed", .values = {"1"}, .kind = AxisKind::count},
             {.name = "gemm", .values = {"openblas"}},
             {.name = "train_samples",
              .values = {std::to_string(data::kFashionMnistTrain)},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTrain},
             {.name = "epoch",
              .values = {"0"},
              .kind = AxisKind::integer,
              .max = kMaxTrainEpochs,
              .min = 0}},
    .metric = "test_accuracy",
    .unit = "fraction",
    .lower_is_better = false,
    .figures = {{.id = "accuracy",
                 .title = "Test accuracy per epoch",
                 .x = "epoch",
                 .y = "median",
                 .series = "arch",
                 .y_label = "test accuracy"},
                {.id = "accuracy_vs_time",
                 .title = "Test accuracy against training time",
                 .x = "elapsed_s",
                 .y = "median",
                 .series = "arch",
                 .y_label = "test accuracy",
                 .x_label = "training time (s), evaluation excluded",
                 .along_x = {"epoch"}},
                {.id = "train_loss",
                 .title = "Training loss per epoch (mean over the epoch's batches)",
                 .x = "epoch",
                 .y = "train_loss",
                 .series = "arch",
                 .y_label = "cross-entropy"},
                {.id = "test_loss",
                 .title = "Test loss per epoch",
                 .x = "epoch",
                 .y = "test_loss",
                 .series = "arch",
                 .y_label = "cross-entropy"}},
    .derived = {"test_loss", "train_loss", "train_accuracy", "elapsed_s", "samples_per_s", "step"},
    // Judged on a `concurdl train` run that reached epoch 10 with the default model; accuracy
    // does not depend on the machine's speed.
    // Law, by an external reference and a binomial model: the data set's README reports 0.8833
    // for an MLP 256-128-100 (a contributed entry of its benchmark table); the default MLP is
    // as deep and about as wide, so it should reach it, within what 10,000 test images resolve: an
    // accuracy p over n images has a standard error sqrt(p (1 - p) / n), 0.0032 at p = 0.883, and
    // three of those is 0.0096: at least 0.873.
    .claims = {{.id = "matches_the_dataset_baseline",
                .statement = "After 10 epochs the default MLP (784-256-128-10, batch 64) reaches "
                             "the 0.883 test accuracy the data set's benchmark reports for an MLP "
                             "256-128-100, within three standard errors over the 10,000 test "
                             "images (at least 0.873)",
                .select = {{"epoch", "10"},
                           {"arch", "784-256-128-10"},
                           {"batch", "64"},
                           {"train_samples", "60000"}},
                .bound = 0.873,
                .timing = false}},
    .recorded_by = "train",
});

// One epoch over the first `images` training images, from the same initial model every
// repetition (reset rebuilds the trainer, untimed).
struct ThroughputState {
  std::shared_ptr<const Dataset> data;
  std::unique_ptr<Trainer> trainer;
  EpochResult last;
};

// PyTorch's plain loop on the same model, batch and images (torch_peer.py --plain), as many
// steps a window as our epoch has, eager or under torch.compile, in the interpreter the row
// names (torch_peer.hpp). Its repetitions are timed inside one run of the script (starting one
// costs seconds, compiling tens of seconds), so they are not interleaved with ours; one window
// per call.
Trial pytorch_trial(const TorchPython& py, bool compiled, bool autocast, int threads,
                    std::size_t batch, std::size_t images) {
  const std::size_t steps = images / batch;
  auto pending = std::make_shared<std::vector<double>>();
  Trial t;
  t.measure = [=, python = py.python]() -> Sample {
    if (pending->empty()) {
      const nlohmann::json j = run_torch_peer(
          fmt::format("--plain --threads {} --batch {} --images {} --steps {} --warmup {} "
                      "--repeat {}{}{}",
                      threads, batch, images, steps, std::max<std::size_t>(5, steps / 10), 12,
                      compiled ? " --compile" : "", autocast ? " --autocast" : ""),
          python);
      for (const auto& v : j.at("seconds")) pending->push_back(v.get<double>());
    }
    const double s = pending->front();
    pending->erase(pending->begin());
    return s;
  };
  t.notes["pytorch"] = fmt::format(
      "PyTorch {} ({}), {} (kernels/nn/scripts/torch_peer.py --plain{}, "
      "torch.set_num_threads({})), {} steps of {} a window; its repetitions are timed inside one "
      "run of the script, not interleaved with ours",
      py.version, py.python,
      autocast ? "eager under torch.autocast(\"cpu\", dtype=torch.bfloat16)"
               : (compiled ? "under torch.compile" : "eager"),
      autocast ? " --autocast" : (compiled ? " --compile" : ""), threads, steps, batch);
  t.work.items = static_cast<double>(steps * batch);
  t.work.flops = t.work.items * training_flops_per_sample(MlpSpec{});
  return t;
}

Trial throughput_trial(const Params& p, GroupCache& cache) {
  const auto images = static_cast<std::size_t>(param_int(p, "images"));
  // A batch larger than the images would make an epoch one short step: not what this measures.
  if (const std::int64_t batch = param_int(p, "batch"); std::size_t(batch) > images)
    throw UsageError(
        fmt::format("parameter 'batch': {} is more than the {} images", batch, images));
  bool compiled = false;
  std::string row = param_str(p, "gemm");
  constexpr std::string_view kAutocast = "_autocast";
  const bool autocast =
      row.size() > kAutocast.size() &&
      row.compare(row.size() - kAutocast.size(), kAutocast.size(), kAutocast) == 0;
  if (autocast) row.resize(row.size() - kAutocast.size());
  if (const TorchPython* py = torch_python_of_row(row, compiled)) {
    if (autocast && compiled)
      throw UsageError(fmt::format("gemm: '{}': autocast is measured eager, not compiled",
                                   param_str(p, "gemm")));
    const int threads = static_cast<int>(param_int(p, "threads"));
    Trial t = pytorch_trial(*py, compiled, autocast, threads,
                            static_cast<std::size_t>(param_int(p, "batch")), images);
    // Under autocast its linear layers multiply in bfloat16: held, as the bf16 row is, to
    // VDPBF16PS's peak on its threads where the CPU has it.
    if (autocast && kernels::have_bf16())
      t.measure = with_own_peak(t.measure, bf16_peak_of_group(cache, threads));
    return t;
  }
  auto data =
      cache.get<std::shared_ptr<const Dataset>>(fmt::format("fashion-mnist:{}", images), [&] {
        const data::FashionMnist fm = data::load_fashion_mnist();
        return std::make_shared<const Dataset>(to_dataset(fm.train, images));
      });
  TrainConfig config;
  config.batch = static_cast<std::size_t>(param_int(p, "batch"));
  config.threads = static_cast<int>(param_int(p, "threads"));
  // Rows bf16 and fp16: the same step with 16-bit weights, activations and gradients and
  // float32 sums (Mlp::train_step_mixed, the update fused), its GEMMs gemm_bf16 (bfloat16, where
  // the CPU has AVX512_BF16) or GEMM v4 widening the 16-bit operands as it packs them (or, an A
  // it reads in place, as its micro-kernel reads it).
  const std::string gemm = param_str(p, "gemm");
  if (gemm == "bf16" || gemm == "fp16") {
    config.precision = gemm == "bf16" ? Precision::bf16 : Precision::fp16;
    config.gemm = kernels::GemmVersion::v4_register;
  } else if (!kernels::parse_gemm_version(gemm, config.gemm)) {
    throw UsageError(fmt::format("gemm: '{}' is not a GEMM version", gemm));
  }
  auto st = std::make_shared<ThroughputState>();
  st->data = data;
  Trial t;
  t.reset = [st, config] {
    st->trainer = std::make_unique<Trainer>(config, *st->data);
    kernels::settle_runtime(config.gemm == kernels::GemmVersion::openblas
                                ? kernels::ThreadRuntime::openblas
                                : kernels::ThreadRuntime::openmp);
  };
  t.run = [st] { st->last = st->trainer->run_epoch(); };
  // bfloat16's GEMMs are held to VDPBF16PS's peak on the row's threads (twice an FMA's FLOPs an
  // instruction), measured once per group beside them, rather than to the float32 FMA peak.
  if (config.precision == Precision::bf16 && kernels::have_bf16()) {
    const double peak = bf16_peak_of_group(cache, config.threads);
    t.observe = [peak](Sample& s) { s.metrics["own_peak_flops"] = peak; };
  }
  t.check = [st]() -> std::string {
    // From the same initial model, one pass must leave a finite loss below chance (ln 10).
    if (!std::isfinite(st->last.loss)) return "the loss is not finite";
    if (st->last.loss >= std::log(10.0))
      return fmt::format("mean loss {:.3f} is not below chance level (ln 10 = 2.303)",
                         st->last.loss);
    if (st->last.samples != st->data->n)
      return fmt::format("{} samples trained, {} in the epoch", st->last.samples, st->data->n);
    return "";
  };
  t.work.items = static_cast<double>(data->n);
  t.work.flops = static_cast<double>(data->n) * training_flops_per_sample(config.spec);
  if (config.threads == 1)
    for (const TorchPython& py : torch_pythons())
      if (!py.why_not.empty())
        t.notes["pytorch" +
                (py.python == torch_pythons().front().python ? std::string() : " " + py.python)] =
            "not measured: " + py.why_not;
  return t;
}

// OpenBLAS and v4, the step in bfloat16 and FP16, and PyTorch in each interpreter named that has
// it (torch_peer.hpp): eager, under torch.compile from torch 2.0, and under
// torch.autocast(bfloat16) (CPU autocast to bfloat16 is in every PyTorch the suite meets, 1.10
// and later).
std::vector<std::string> throughput_gemms() {
  std::vector<std::string> v = {"openblas", "v4_register", "bf16", "fp16"};
  for (const TorchPython& py : torch_pythons()) {
    if (!py.why_not.empty()) continue;
    v.push_back(py.row);
    if (py.can_compile()) v.push_back(py.row + "_compiled");
    v.push_back(py.row + "_autocast");
  }
  return v;
}

// Quick profile: 1 .. the hardware threads, and twice that (one oversubscribed point).
std::vector<std::string> quick_threads() {
  std::vector<std::string> v = thread_counts_up_to_cores();
  const std::string over =
      std::to_string(std::min<std::int64_t>(2 * hardware_threads(), kMaxThreads));
  if (v.back() != over) v.push_back(over);
  return v;
}

const bool registered_throughput = register_experiment({
    .id = "kernels/train_throughput",
    .chapter = "kernels",
    .title = "Training throughput of the MLP (samples/s) against threads: OpenBLAS vs GEMM v4, "
             "the step in bfloat16 and FP16, PyTorch the peer",
    .axes = {{.name = "gemm", .values = throughput_gemms()},
             {.name = "threads",
              .values = thread_counts(),
              .quick = quick_threads(),
              .kind = AxisKind::count,
              .max = kMaxThreads},
             {.name = "batch",
              .values = {"64", "256"},
              .quick = {"64"},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTrain},
             {.name = "images",
              .values = {"12800"},
              .quick = {"6400"},
              .kind = AxisKind::count,
              .max = data::kFashionMnistTrain}},  // the training set has no more
    .baseline = {{"threads", "1"}},
    .metrics = {{.name = "own_peak_flops",
                 .unit = "FLOP/s",
                 .lower_is_better = false,
                 .what = "the bf16 and autocast rows only: VDPBF16PS's peak on the row's "
                         "threads, measured in this run (their fraction_of_ceiling divides by it)",
                 .optional = true}},
    // The step's FLOPs against its threads' FMA peak (bfloat16's: against its own, above).
    .ceiling = Ceiling::peak_flops_per_worker,
    .interleave = {"gemm", "threads"},
    .prepare = throughput_trial,
    .figures = {{.id = "samples_per_s",
                 .title = "Training samples/s against threads",
                 .x = "threads",
                 .y = "items_per_s",
                 .series = "gemm",
                 .y_label = "training samples/s"},
                {.id = "speedup",
                 .title = "Training speedup against threads (vs 1 thread)",
                 .kind = FigureKind::speedup,
                 .x = "threads",
                 .series = "gemm"}},
    // One claim per GEMM of ours: selected by threads alone, the claim also took PyTorch's
    // peer row (gemm=pytorch) where torch is installed, and judged PyTorch's scaling.
    .claims = {{.id = "two_threads_train_faster_openblas",
                // Magnitude: a scaling ratio on vCPUs (1.21x on the Emerald Rapids guest,
                // 0.975-1.71x on Zen 5, the low end where the guest ran two threads at about one
                // core's rate).
                .statement =
                    "At batch 64, how many times as many samples/s two threads train as one with "
                    "OpenBLAS's GEMM (far from 2x: the GEMMs are small and the rest of a step runs "
                    "on one thread)",
                .select = {{"threads", "2"}, {"batch", "64"}, {"gemm", "openblas"}},
                .field = "speedup",
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt, ClaimCause::peer_kernels},
                .unit = "×",
                .min_cpus = 2},
               {.id = "two_threads_train_faster_v4",
                // Magnitude: a scaling ratio on vCPUs (1.29x on the Emerald Rapids guest,
                // 1.09-1.65x on Zen 5, the low end as above).
                .statement =
                    "At batch 64, how many times as many samples/s two threads train as one with "
                    "GEMM v4",
                .select = {{"threads", "2"}, {"batch", "64"}, {"gemm", "v4_register"}},
                .field = "speedup",
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::cores_and_smt},
                .unit = "×",
                .min_cpus = 2}},
});

}  // namespace

}  // namespace concurdl::nn
