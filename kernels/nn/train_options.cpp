// `concurdl train`'s flags: declared for CLI11, parsed, and each checked against its range,
// before anything is loaded (train_args.hpp). The run itself is train_command.cpp's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/trainer.hpp"
#include "train_args.hpp"
#include "train_record.hpp"

namespace concurdl::nn {

namespace fs = std::filesystem;

namespace {

// A flag's value outside its range: the message names the flag and the value.
template <class T>
void require(bool ok, const char* flag, const T& value, const char* need) {
  if (!ok) throw UsageError(fmt::format("{}: '{}' is not allowed ({})", flag, value, need));
}

// What one run may hold, so that an absurd --arch or --batch is a usage error rather than a
// failed allocation: 2^28 parameters (1 GiB of floats; 3 GiB with the gradients and the
// momentum), and a step's activations, batch x the sum of the widths, 2^32 floats (16 GiB).
// Widths of at most 2^20 and 1024 layers keep the products below from overflowing.
constexpr std::uint64_t kMaxWidth = 1u << 20, kMaxLayers = 1024;
constexpr std::uint64_t kMaxParameters = std::uint64_t{1} << 28;
constexpr std::uint64_t kMaxActivations = std::uint64_t{1} << 32;

void check_size(const MlpSpec& spec, const std::string& arch, std::size_t batch) {
  if (spec.widths.size() > kMaxLayers)
    throw UsageError(fmt::format("--arch: '{}' has {} layers; at most {}", arch, spec.widths.size(),
                                 kMaxLayers));
  std::uint64_t parameters = 0, units = 0;
  for (std::size_t i = 0; i < spec.widths.size(); ++i) {
    const std::uint64_t w = spec.widths[i];
    if (w > kMaxWidth)
      throw UsageError(
          fmt::format("--arch: '{}' has a layer {} wide; at most {}", arch, w, kMaxWidth));
    units += w;
    if (i > 0) parameters += spec.widths[i - 1] * w + w;  // weights and biases
  }
  if (parameters > kMaxParameters)
    throw UsageError(fmt::format("--arch: '{}' has {} parameters; at most {} (2^28)", arch,
                                 parameters, kMaxParameters));
  if (batch * units > kMaxActivations)
    throw UsageError(fmt::format(
        "--batch: {} rows of the {} units of '{}' are {} activations a step; at most {} (2^32)",
        batch, units, arch, batch * units, kMaxActivations));
}

// A whole-number flag: digits only (CLI11 would read "-1" into an unsigned as 2^64 - 1, and
// --epochs -1 would train for ever), within [lo, hi]. The message names the value and the range;
// CLI11 prefixes the flag.
CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, v);  // digits only, no sign
        if (text.empty() || ec != std::errc{} || stop != end || v < lo || v > hi)
          return fmt::format("'{}' is not allowed (need a whole number in [{}, {}])", text, lo, hi);
        return {};
      },
      "INT", "whole_number");
}

// The options of one run, model and data first: what `concurdl train --help` lists.
void add_model_options(CLI::App& app, TrainArgs& a) {
  app.add_option("--epochs", a.epochs, "epochs to reach (a resumed run continues to this count)")
      ->check(whole_number(1, kMaxTrainEpochs));
  app.add_option("--batch", a.batch, "mini-batch size (at most the training images)")
      ->check(whole_number(1, 1u << 30));
  app.add_option("--lr", a.lr, "learning rate of the first epoch");
  app.add_option("--lr-decay", a.lr_decay, "epoch e runs at lr * decay^e (1: constant)");
  app.add_option("--momentum", a.momentum, "SGD momentum");
  app.add_option("--weight-decay", a.weight_decay, "L2 weight decay");
  app.add_option("--threads", a.threads,
                 "compute threads (GEMM, element-wise ops); default: all (with --ranks: the "
                 "cores / ranks per MPI rank, 1 per thread rank)")
      ->check(whole_number(1, kMaxThreads));
  app.add_option("--seed", a.seed, "initialisation and shuffling seed")
      ->check(whole_number(0, UINT64_MAX));
  app.add_option("--arch", a.arch, "layer widths, e.g. 784-256-128-10");
  app.add_option("--gemm", a.gemm,
                 "GEMM: openblas (default) or the suite's v1_naive .. v4_register");
  app.add_option("--precision", a.precision,
                 "fp32 (default); bf16 or fp16: 16-bit weights, activations and gradients, "
                 "float32 master weights and sums (fp16 with a dynamic loss scale)");
  app.add_option("--train-limit", a.train_limit, "train on the first N images only (0: all 60000)")
      ->check(whole_number(0, data::kFashionMnistTrain));
  app.add_option("--test-limit", a.test_limit, "evaluate on the first N test images (0: all 10000)")
      ->check(whole_number(0, data::kFashionMnistTest));
  app.add_option("--data", a.data,
                 "Fashion-MNIST directory (default $CONCURDL_FASHION_MNIST or Debian's)");
  app.add_option("--checkpoint", a.checkpoint, "write a checkpoint here after every epoch");
  app.add_option("--resume", a.resume, "continue from this checkpoint");
  app.add_option("--out", a.out, "parent directory of the run directory (default results/runs)");
  app.add_flag("--no-report", a.no_report, "write results.json only");
  app.add_flag("--quiet", a.quiet, "no progress on stderr");
}

// The options of a distributed run: ranks, backend, mode, and each training mode's own flags
// (from the modes' rows).
void add_distributed_options(CLI::App& app, TrainArgs& a) {
  app.add_option("--ranks", a.ranks,
                 "data-parallel ranks (chapter 05); --batch is then the per-rank batch")
      ->check(whole_number(1, kMaxThreads));
  app.add_option("--backend", a.backend,
                 fmt::format("with --ranks: {} (threads the default; a mode runs on the backends "
                             "its row names)",
                             fmt::join(distributed_backend_names(), ", ")));
  app.add_option("--bucket-mb", a.bucket_mb,
                 "with --ranks: all-reduce the gradients in buckets of at least this many MiB "
                 "(0: one per layer; default 0.125)")
      ->check(CLI::Range(0.0, 1024.0));
  app.add_flag("--overlap", a.overlap,
               "with --ranks: all-reduce finished buckets while backward goes on");
  app.add_flag("--shard-update", a.shard_update,
               "with --ranks: each rank updates only its block of the summed gradients, then the "
               "parameters are all-gathered (ZeRO stage 1's step; any --precision)");
  app.add_option("--zero", a.zero,
                 "with --ranks: ZeRO stage 0-3 (shard momentum, + gradients, + parameters: "
                 "FSDP), ring reduce-scatter / all-gather per layer")
      ->check(whole_number(0, 3));
  app.add_option("--allreduce", a.allreduce,
                 "with --ranks: native (default) or a hand-written all-reduce (v4_ring, ...)");
  app.add_option("--hostfile", a.hostfile,
                 "with --backend mpi: MPI hostfile (several machines); with --backend processes: "
                 "the hosts of the parameter server's workers");
  std::vector<std::string> by_mode;  // the modes --mode chooses
  for (const std::string& name : training_mode_names())
    if (const TrainingMode* m = find_training_mode(name); m == nullptr || m->chosen_by.empty())
      by_mode.push_back(name);
  app.add_option("--mode", a.mode,
                 fmt::format("with --ranks: {} (sync: the all-reduce, the default)",
                             fmt::join(by_mode, ", ")));
  app.add_option("--straggler", a.stragglers,
                 "with --ranks: RANK:FACTOR makes that worker's compute FACTOR times slower "
                 "(repeatable)");
  app.add_option("--fail-worker", a.fail_worker,
                 "with --ranks: RANK:STEP makes that worker fail after STEP steps (asynchronous "
                 "modes drop it and go on; sync stops)");
  for (const ModeFlag& f : training_mode_flags()) {
    if (f.kind == ModeFlag::Kind::toggle) {
      app.add_flag(f.name, a.mode_toggles[f.name], f.help);
      continue;
    }
    CLI::Option* o = app.add_option(f.name, a.mode_values[f.name], f.help);
    if (f.kind == ModeFlag::Kind::number) o->type_name("UINT");
    if (f.kind == ModeFlag::Kind::number)
      o->check(whole_number(static_cast<std::uint64_t>(f.min), static_cast<std::uint64_t>(f.max)));
  }
  app.add_flag("--trace", a.trace,
               "record the run's timeline (its first 200000 spans): trace.json (Perfetto, "
               "chrome://tracing) and a Gantt chart of two steps in figures/timeline.svg");
}

// The mixture-of-experts block (moe_trainer.hpp): its size and where it sits.
void add_moe_options(CLI::App& app, TrainArgs& a) {
  app.add_option("--moe-experts", a.moe_experts,
                 "a mixture-of-experts block of E experts inside the MLP (one trainer)")
      ->check(whole_number(2, 1u << 16));
  app.add_option("--moe-top-k", a.moe_top_k, "with --moe-experts: experts per token, 1 or 2")
      ->check(whole_number(1, 2));
  app.add_option("--capacity-factor", a.capacity_factor,
                 "with --moe-experts: capacity per expert, factor x k x batch / E (default 1.25)");
  app.add_flag("--moe-dropless", a.moe_dropless,
               "with --moe-experts: no capacity, no choice dropped");
  app.add_option("--moe-aux", a.moe_aux,
                 "with --moe-experts: the load-balancing loss's weight alpha (default 0.01)");
  app.add_option("--moe-after", a.moe_after,
                 "with --moe-experts: the block follows hidden layer L (default 1, the first)")
      ->check(whole_number(1, kMaxLayers));
  app.add_option("--moe-hidden", a.moe_hidden,
                 "with --moe-experts: each expert's hidden width (default: the width it sits at)")
      ->check(whole_number(1, kMaxWidth));
}

}  // namespace

void check_moe_flags(const TrainArgs& a, const Given& given) {
  if (!given("--moe-experts")) {
    for (const char* flag : {"--moe-top-k", "--capacity-factor", "--moe-dropless", "--moe-aux",
                             "--moe-after", "--moe-hidden"})
      if (given(flag)) throw UsageError(fmt::format("{}: only with --moe-experts E", flag));
    return;
  }
  // Over ranks, the block trains in a mode that takes it (TrainingMode::trains_moe: chapter 06's
  // --ep P [--dp D]), chosen by its flags; every other way of spreading the work is refused.
  const TrainingMode* chosen = nullptr;
  std::vector<std::string> how;  // how each mode that takes the block is chosen
  for (const std::string& name : training_mode_names()) {
    const TrainingMode* m = find_training_mode(name);
    if (m == nullptr || m->trains_moe.empty()) continue;
    how.push_back(m->trains_moe);
    for (const std::string& f : m->chosen_by)
      if (given(f.c_str())) chosen = m;
  }
  std::vector<std::string> refused = {"--ranks", "--mode"};
  for (const ModeFlag& f : training_mode_flags())
    if (chosen == nullptr || !chosen->owns(f.name)) refused.push_back(f.name);
  for (const std::string& flag : refused)
    if (given(flag.c_str()))
      throw UsageError(fmt::format(
          "{}: not with --moe-experts ({})", flag,
          how.empty() ? std::string("the MoE block trains as one trainer")
                      : fmt::format("the MoE block trains as one trainer, or over ranks with {}",
                                    fmt::join(how, " or "))));
  if (a.precision != "fp32")
    throw UsageError(
        fmt::format("--precision: '{}' not with --moe-experts (float32 only)", a.precision));
  require(std::isfinite(a.capacity_factor) && a.capacity_factor > 0, "--capacity-factor",
          a.capacity_factor, "need > 0");
  if (given("--capacity-factor") && a.moe_dropless)
    throw UsageError("--capacity-factor: not with --moe-dropless (no capacity)");
  require(std::isfinite(a.moe_aux) && a.moe_aux >= 0, "--moe-aux", a.moe_aux, "need >= 0");
}

std::optional<MoeBlock> moe_block(const TrainArgs& a, const MlpSpec& spec) {
  if (a.moe_experts == 0) return std::nullopt;
  const std::size_t layers = spec.widths.size() - 1;
  if (a.moe_after >= layers)
    throw UsageError(layers < 2
                         ? fmt::format("--moe-experts: --arch '{}' has no hidden layer to follow",
                                       spec.describe())
                         : fmt::format("--moe-after: '{}' is not allowed (--arch '{}' has hidden "
                                       "layers 1 to {})",
                                       a.moe_after, spec.describe(), layers - 1));
  MoeBlock b;
  b.after = a.moe_after;
  b.hidden = a.moe_hidden;
  b.experts = a.moe_experts;
  b.top_k = a.moe_top_k;
  b.capacity_factor = a.capacity_factor;
  b.dropless = a.moe_dropless;
  b.aux_alpha = a.moe_aux;
  // The block's floats, as check_size counts the MLP's: E experts of 2 h d + h + d, the router.
  const std::uint64_t d = spec.widths[b.after], h = b.hidden == 0 ? d : b.hidden;
  const std::uint64_t floats = b.experts * (2 * h * d + h + d) + b.experts * (d + 1);
  if (floats > kMaxParameters)
    throw UsageError(
        fmt::format("--moe-experts: {} experts of {}x{} are {} parameters; at most {} "
                    "(2^28)",
                    b.experts, d, h, floats, kMaxParameters));
  try {
    (void)b.layer_spec(spec);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--moe-experts: {}", e.what()));
  }
  return b;
}

TrainConfig make_config(const TrainArgs& a) {
  require(a.epochs >= 1, "--epochs", a.epochs, "need >= 1");
  require(a.batch >= 1, "--batch", a.batch, "need >= 1");
  require(std::isfinite(a.lr) && a.lr > 0, "--lr", a.lr, "need > 0");
  require(std::isfinite(a.momentum) && a.momentum >= 0 && a.momentum < 1, "--momentum", a.momentum,
          "need 0 <= momentum < 1");
  require(std::isfinite(a.weight_decay) && a.weight_decay >= 0, "--weight-decay", a.weight_decay,
          "need >= 0");
  require(std::isfinite(a.lr_decay) && a.lr_decay > 0 && a.lr_decay <= 1, "--lr-decay", a.lr_decay,
          "need 0 < decay <= 1");
  require(a.threads >= 1, "--threads", a.threads, "need >= 1");
  // The training set is the data set's 60000 images or the first --train-limit of them (the
  // loader checks the count), so a batch larger than it is known before anything is loaded.
  const std::size_t train_images = a.train_limit == 0 ? data::kFashionMnistTrain : a.train_limit;
  if (a.batch > train_images)
    throw UsageError(fmt::format("--batch: {} is more than the {} training images{}", a.batch,
                                 train_images, a.train_limit == 0 ? "" : " (--train-limit)"));
  if (a.ranks > 1 && a.batch * a.ranks > train_images)
    throw UsageError(
        fmt::format("--batch: {} per rank x {} ranks is more than the {} training images{}",
                    a.batch, a.ranks, train_images, a.train_limit == 0 ? "" : " (--train-limit)"));
  TrainConfig c;
  try {
    c.spec = MlpSpec::parse(a.arch);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--arch: '{}': {}", a.arch, e.what()));
  }
  const std::size_t in = data::kFashionMnistSide * data::kFashionMnistSide;
  if (c.spec.widths.front() != in || c.spec.widths.back() != data::kFashionMnistClasses)
    throw UsageError(fmt::format(
        "--arch: '{}' must start with {} (28 x 28 pixels) and end with {} (the classes)", a.arch,
        in, data::kFashionMnistClasses));
  check_size(c.spec, a.arch, a.batch);
  if (!kernels::parse_gemm_version(a.gemm, c.gemm)) {
    std::vector<std::string> names;
    for (auto v : kernels::gemm_versions()) names.emplace_back(kernels::gemm_version_name(v));
    throw UsageError(
        fmt::format("--gemm: '{}' is not a GEMM version ({})", a.gemm, fmt::join(names, ", ")));
  }
  try {
    c.precision = parse_precision(a.precision);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--precision: {}", e.what()));
  }
  c.batch = a.batch;
  c.sgd = {a.lr, a.momentum, a.weight_decay};
  c.lr_decay = a.lr_decay;
  c.seed = a.seed;
  c.threads = a.threads;
  return c;
}

void check_writable_parent(const std::string& flag, const fs::path& p) {
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(parent))
    throw UsageError(
        fmt::format("{}: '{}': directory '{}' does not exist", flag, p.string(), parent.string()));
}

// Step 1: the command line into TrainArgs; nothing when it asked for --help (printed).
std::optional<TrainArgs> parse_train_args(const std::vector<std::string>& args) {
  TrainArgs a;
  CLI::App app{"concurdl train: the MLP on Fashion-MNIST, recorded and charted", "concurdl train"};
  add_model_options(app, a);
  add_distributed_options(app, a);
  add_moe_options(app, a);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("train: {} (concurdl train --help shows the usage)", e.what()));
  }
  a.threads_given = app.count("--threads") > 0;
  a.given.clear();
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0) a.given.push_back(o->get_name());
  return a;
}

}  // namespace concurdl::nn
