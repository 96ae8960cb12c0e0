// `concurdl train`: trains the MLP on Fashion-MNIST with progress on stderr, records the run (a
// curve of loss and test accuracy against epochs and time, experiment "kernels/train") in the
// result schema, charts it, and prints the run directory last on stdout, like `concurdl run`.
//
//   concurdl train --epochs 10 --threads 2 --checkpoint ck.bin
//   concurdl train --epochs 20 --resume ck.bin --checkpoint ck.bin   # 10 more epochs
//   concurdl train --ranks 2 --backend threads --batch 32 --overlap  # data-parallel (ch05)
//   concurdl train --ranks 4 --backend mpi --bucket-mb 0.25          # under mpirun
//   concurdl train --ranks 2 --mode ps-async --straggler 1:4          # asynchronous (ch07)
//   concurdl train --moe-experts 4 --moe-top-k 2                       # a MoE block inside
//   concurdl train --moe-experts 4 --ep 2 --dp 2 --backend mpi          # its experts over ranks
//
// With --ranks N, --batch is the per-rank batch (the global batch is N x --batch, recorded as
// the records' "batch") and a data-parallel backend registered by chapter 05
// (distributed_train.hpp) runs the same loop on every rank: rank 0 alone evaluates, records
// and writes the checkpoint; every rank resumes from it. --backend mpi re-executes this
// command under mpirun (as `concurdl run --ranks` does).
//
// --epochs is the epoch count to reach: a run resumed from a checkpoint taken after epoch 10
// with --epochs 20 trains epochs 11 to 20 and ends with the parameters an uninterrupted
// 20-epoch run would have (same seed, batch and threads). Exit codes as for every command:
// 0 done, 1 training failed (a loss that is not finite), 2 bad input (a flag, the data set, a
// checkpoint), with one line on stderr naming what was wrong.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/data/error.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/commands.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/provenance.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/stats.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/moe_trainer.hpp"
#include "concurdl/nn/trainer.hpp"
#include "train_args.hpp"
#include "train_record.hpp"

namespace concurdl::nn {

namespace fs = std::filesystem;

namespace {

// Progress on stderr: rewritten in place on a terminal, one line per epoch otherwise.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0) {}
  void step(const StepProgress& p, std::size_t epochs) {
    if (quiet_ || !tty_) return;
    const double rate = p.seconds > 0 ? static_cast<double>(p.samples) / p.seconds : 0;
    std::fprintf(stderr, "\r  epoch %llu/%zu  step %zu/%zu  loss %.4f  acc %.4f  %.0f samples/s   ",
                 static_cast<unsigned long long>(p.epoch + 1), epochs, p.step_in_epoch,
                 p.steps_per_epoch, p.loss, p.accuracy, rate);
    std::fflush(stderr);
  }
  void line(const std::string& text) {
    if (quiet_) return;
    std::fprintf(stderr, "%s%s\n", tty_ ? "\r\033[K" : "", text.c_str());
  }

 private:
  bool quiet_, tty_;
};

// A single trainer (nn::Trainer, nn::MoeTrainer) as the one rank of a run without --ranks.
template <class T>
class OneRank : public RankTrainer {
 public:
  template <class... Args>
  explicit OneRank(Args&&... args) : t_(std::forward<Args>(args)...) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  EpochResult run_epoch(const std::function<void(const StepProgress&)>& on_progress,
                        std::size_t report_every) override {
    return t_.run_epoch(on_progress, report_every);
  }
  EvalResult evaluate(const Dataset& d) override { return t_.evaluate(d); }
  void save(const std::filesystem::path& checkpoint) const override { t_.save(checkpoint); }
  void resume(const std::filesystem::path& checkpoint) override { t_.resume(checkpoint); }
  const TrainState& state() const override { return t_.state(); }

 protected:
  T t_;
};

class LocalTrainer final : public OneRank<Trainer> {
 public:
  using OneRank::OneRank;
  std::string describe() const override { return "1 rank"; }
  std::map<std::string, double> epoch_metrics() const override {
    if (t_.config().precision != Precision::fp16) return {};
    return {{"loss_scale", static_cast<double>(t_.loss_scaler().scale())}};
  }
};

// --moe-experts: its records carry the block's routing statistics.
class MoeLocalTrainer final : public OneRank<MoeTrainer> {
 public:
  using OneRank::OneRank;
  std::string describe() const override { return "1 rank, MoE " + t_.state().moe; }
  std::map<std::string, double> epoch_metrics() const override { return t_.epoch_metrics(); }
};

// What a run needs once its options are checked: the model's configuration, who trains it,
// and where the data set is.
struct TrainPlan {
  TrainConfig config;
  const DistributedBackend* backend = nullptr;
  const TrainingMode* mode = nullptr;
  DistributedOptions dist;
  std::optional<MoeBlock> moe;  // --moe-experts: the block inside the MLP
  fs::path data_dir;
};

// A checkpoint to resume from, read once into a model of this run's architecture, so that a
// corrupt or foreign one is refused before the data set is loaded (the trainer reads it again).
void check_resume(const TrainArgs& a, const TrainConfig& config,
                  const std::optional<MoeBlock>& moe) {
  if (a.resume.empty()) return;
  if (!fs::is_regular_file(a.resume))
    throw UsageError(fmt::format("--resume: '{}' is not a readable file", a.resume));
  try {
    if (moe) {
      MoeMlp probe(config.spec, *moe, config.seed, config.gemm);
      Sgd mlp_opt(probe.mlp().parameters().size(), config.sgd);
      Sgd moe_opt(probe.moe().parameters().size(), config.sgd);
      (void)load_moe_checkpoint(a.resume, probe, mlp_opt, moe_opt);
      return;
    }
    Mlp probe(config.spec, config.seed, config.gemm);
    Sgd opt(probe.parameters().size(), config.sgd);
    (void)load_checkpoint(a.resume, probe, opt);
  } catch (const CheckpointError& e) {
    throw UsageError(fmt::format("--resume: {}", e.what()));
  }
}

// Step 2: every option checked, before the data set is loaded or mpirun started: a bad
// --allreduce, --schedule, --pipeline or checkpoint costs nothing.
TrainPlan plan_run(TrainArgs& a) {
  TrainPlan plan;
  const Given given = [&](const char* flag) {
    return std::find(a.given.begin(), a.given.end(), flag) != a.given.end();
  };
  check_moe_flags(a, given);
  const TrainWorkers workers = resolve_workers(a, given);
  plan.backend = workers.backend;
  plan.mode = workers.mode;
  plan.dist = workers.options;
  plan.config = make_config(a);
  plan.moe = moe_block(a, plan.config.spec);
  // The records' batch: the global batch of a synchronous step; a push's in the other modes.
  plan.dist.moe = plan.moe;
  if (plan.backend != nullptr && (plan.mode == nullptr || plan.mode->global_batch))
    plan.config.batch = a.batch * a.ranks;
  if (plan.mode != nullptr && plan.mode->check)
    plan.mode->check(plan.dist, plan.config);
  else if (plan.mode == nullptr && plan.backend != nullptr && plan.backend->check)
    plan.backend->check(plan.dist, plan.config);
  if (!a.checkpoint.empty()) check_writable_parent("--checkpoint", a.checkpoint);
  if (!a.checkpoint.empty() && fs::is_directory(a.checkpoint))
    throw UsageError(
        fmt::format("--checkpoint: '{}' is a directory; give the file to write", a.checkpoint));
  check_resume(a, plan.config, plan.moe);
  plan.data_dir = a.data.empty() ? data::fashion_mnist_dir() : fs::path(a.data);
  plan.dist.data = plan.data_dir;
  plan.dist.train_limit = a.train_limit;
  plan.dist.gemm = a.gemm;
  std::string why;
  if (!data::fashion_mnist_present(plan.data_dir, &why)) throw UsageError(why);
  return plan;
}

// Step 3, --backend mpi: outside mpirun, start it with this same command line and return its
// status (as run --ranks does); inside it, join the launch. Rank 0 alone prints and writes.
std::optional<int> launch_or_join_mpi(TrainArgs& a, const TrainPlan& plan,
                                      const std::vector<std::string>& args) {
  if (plan.backend == nullptr || !plan.backend->mpi_launch) return std::nullopt;
  if (!ranks::launched_by_mpi()) {
    std::vector<std::string> argv1 = {"train"};  // argv[1..]: the command, then its flags
    argv1.insert(argv1.end(), args.begin(), args.end());
    return ranks::launch(plan.dist.ranks, a.hostfile, argv1);
  }
  ranks::init();
  if (ranks::world_size() != plan.dist.ranks)
    throw UsageError(fmt::format("--ranks {}: this MPI launch has {} rank(s)", plan.dist.ranks,
                                 ranks::world_size()));
  if (ranks::world_rank() != 0) a.quiet = true;
  return std::nullopt;
}

// Step 4: the training loop, the same on every rank of a data-parallel run (one rank
// otherwise); rank 0 (the writer) evaluates, records, prints and writes the checkpoint. A
// backend or mode calls it once per rank with that rank's trainer.
class TrainLoop {
 public:
  TrainLoop(const TrainArgs& a, const TrainPlan& plan, const std::vector<std::string>& args,
            const Dataset& train, const Dataset& test, Progress& progress)
      : a_(a),
        plan_(plan),
        args_(args),
        test_(test),
        progress_(progress),
        ctx_{plan.config, train.n, test.n, plan.moe ? plan.moe->describe(plan.config.spec) : ""} {}

  void operator()(RankTrainer& trainer) {
    const bool writer = trainer.writer();
    resume(trainer, writer);
    if (writer) open_run(trainer);
    const std::size_t start_epoch = trainer.state().epoch;
    if (start_epoch == 0 && writer) {
      const EvalResult e0 = trainer.evaluate(test_);
      f_.records.push_back(curve_record(ctx_, 0, e0, nullptr, 0, trainer.state().step));
      write_run(run_dir_, f_);
    }
    if (start_epoch >= a_.epochs && writer)
      progress_.line(
          fmt::format("concurdl: the checkpoint has {} epochs already; --epochs {} "
                      "asks for no more",
                      start_epoch, a_.epochs));
    if (writer) progress_.line(describe(trainer));
    bool ok = true;
    double elapsed = 0;  // training time of this run, evaluation excluded
    for (std::size_t epoch = start_epoch; epoch < a_.epochs && ok; ++epoch)
      ok = run_epoch(trainer, epoch, elapsed);
    if (writer) finite_ = ok;
  }

  RunFile& run() { return f_; }
  const fs::path& run_dir() const { return run_dir_; }
  void set_placement(nlohmann::json placement) { placement_ = std::move(placement); }
  bool finite() const { return finite_; }

 private:
  void resume(RankTrainer& trainer, bool writer) {
    if (a_.resume.empty()) return;
    try {
      trainer.resume(a_.resume);
    } catch (const CheckpointError& e) {
      throw UsageError(e.what());
    }
    if (writer && trainer.state().seed != plan_.config.seed)
      progress_.line(
          fmt::format("concurdl: warning: the checkpoint was trained with seed {}; the "
                      "run continues with it (--seed {} is not used)",
                      trainer.state().seed, plan_.config.seed));
  }

  // The run directory and its record, rewritten (atomically) after every epoch.
  void open_run(const RankTrainer& trainer) {
    const DistributedOptions& dist = plan_.dist;
    f_.concurdl_version = build::version;
    f_.command = {"concurdl", "train"};
    f_.command.insert(f_.command.end(), args_.begin(), args_.end());
    f_.provenance = collect_provenance();
    ctx_.config.seed = trainer.state().seed;  // a resumed run shuffles with its checkpoint's seed
    nlohmann::json& training = f_.provenance["training"];
    training = training_provenance(ctx_, plan_.data_dir, a_.resume, a_.checkpoint);
    if (plan_.backend != nullptr) {
      training["data_parallel"] = {
          {"ranks", dist.ranks},           {"backend", dist.backend},
          {"batch_per_rank", a_.batch},    {"global_batch", plan_.config.batch},
          {"bucket_mb", dist.bucket_mb},   {"overlap", dist.overlap},
          {"allreduce", dist.allreduce},   {"zero_stage", dist.zero},
          {"trainer", trainer.describe()}, {"mode", dist.mode}};
      if (!dist.stragglers.empty()) {
        nlohmann::json st = nlohmann::json::object();
        for (const auto& [r, factor] : dist.stragglers) st[std::to_string(r)] = factor;
        training["data_parallel"]["stragglers"] = st;
      }
    }
    if (placement_) training["data_parallel"]["mpi_placement"] = *placement_;
    run_dir_ = make_run_dir(a_.out, f_.provenance["host"].get<std::string>(), short_commit());
    write_run(run_dir_, f_);
  }

  std::string describe(const RankTrainer& trainer) const {
    const TrainConfig& c = plan_.config;
    const char* s = c.threads == 1 ? "" : "s";
    if (plan_.backend == nullptr)
      return fmt::format(
          "concurdl: training {}{} on {} images ({} test), batch {}, {} thread{}, "
          "GEMM {}, seed {}",
          c.spec.describe(), ctx_.moe.empty() ? "" : " with the MoE block " + ctx_.moe,
          ctx_.train_samples, ctx_.test_samples, c.batch, c.threads, s, a_.gemm, c.seed);
    return fmt::format(
        "concurdl: training {} on {} images ({} test), {}, {} compute thread{} per "
        "rank, GEMM {}, seed {}",
        c.spec.describe(), ctx_.train_samples, ctx_.test_samples, trainer.describe(), c.threads, s,
        a_.gemm, c.seed);
  }

  // One epoch, then (on the writer) its test-set evaluation, record and checkpoint; false when
  // the loss is not finite.
  bool run_epoch(RankTrainer& trainer, std::size_t epoch, double& elapsed) {
    const bool writer = trainer.writer();
    const EpochResult r = trainer.run_epoch(
        [&](const StepProgress& p) {
          if (writer) progress_.step(p, a_.epochs);
        },
        50);
    elapsed += r.seconds;
    bool ok = std::isfinite(r.loss);
    if (!writer) return ok;
    const EvalResult e = trainer.evaluate(test_);
    ok = ok && std::isfinite(e.loss);
    f_.records.push_back(curve_record(ctx_, epoch + 1, e, &r, elapsed, trainer.state().step));
    for (const auto& [name, value] : trainer.epoch_metrics())
      f_.records.back().derived[name] = value;
    if (!ok) {
      f_.records.back().valid = false;
      f_.records.back().validation =
          "the loss is not finite: training diverged (try a smaller --lr)";
    }
    write_run(run_dir_, f_);
    if (!a_.checkpoint.empty() && ok) trainer.save(a_.checkpoint);
    progress_.line(
        fmt::format("  epoch {:>3}/{}  train loss {:.4f} acc {:.4f}  test loss {:.4f} "
                    "acc {:.4f}  {:.0f} samples/s  {:.1f} s",
                    epoch + 1, a_.epochs, r.loss, r.accuracy, e.loss, e.accuracy,
                    r.seconds > 0 ? static_cast<double>(r.samples) / r.seconds : 0.0, elapsed));
    return ok;
  }

  const TrainArgs& a_;
  const TrainPlan& plan_;
  const std::vector<std::string>& args_;
  const Dataset& test_;
  Progress& progress_;
  TrainRecordContext ctx_;
  RunFile f_;
  fs::path run_dir_;
  std::optional<nlohmann::json> placement_;  // an MPI launch's hosts and transports
  bool finite_ = true;
};

// Step 5: the run's claims, report and trace; the run directory last on stdout.
int finish_run(const TrainArgs& a, TrainLoop& loop) {
  RunFile& f = loop.run();
  f.provenance["finished"] = utc_now_iso();
  // The training lesson's claims (test accuracy after 10 epochs), judged and kept as a run's.
  // They are about the dense MLP: a run with a MoE block inside it is not judged by them.
  const std::vector<ClaimResult> claims =
      a.moe_experts == 0 ? evaluate_claims(f) : std::vector<ClaimResult>{};
  f.claims = claims_json(claims);
  write_run(loop.run_dir(), f);
  if (!claims.empty() && !a.quiet)
    std::fprintf(stderr, "\nWhat this run shows (the lessons' claims):\n%s\n",
                 claims_text(claims).c_str());
  if (!a.no_report) {
    const ReportFiles rep = write_report({f}, {}, loop.run_dir());
    for (const auto& w : rep.warnings) std::fprintf(stderr, "concurdl: warning: %s\n", w.c_str());
  }
  if (a.trace) write_train_trace(loop.run_dir(), f, a.quiet);
  if (!loop.finite())
    std::fprintf(stderr, "concurdl: INVALID kernels/train: the loss is not finite (diverged)\n");
  std::cout << loop.run_dir().string() << std::endl;
  return loop.finite() ? 0 : 1;
}

int train_main(const std::vector<std::string>& args) {
  std::optional<TrainArgs> parsed = parse_train_args(args);
  if (!parsed) return 0;  // --help
  TrainArgs& a = *parsed;
  const TrainPlan plan = plan_run(a);
  if (const auto launched = launch_or_join_mpi(a, plan, args)) return *launched;
  Progress progress(a.quiet);
  progress.line(fmt::format("concurdl: loading Fashion-MNIST from {}", plan.data_dir.string()));
  data::FashionMnist fm;
  try {
    fm = data::load_fashion_mnist(plan.data_dir);
  } catch (const data::DataError& e) {
    throw UsageError(e.what());
  }
  const Dataset train = to_dataset(fm.train, a.train_limit);
  const Dataset test = to_dataset(fm.test, a.test_limit);
  TrainLoop loop(a, plan, args, train, test, progress);
  // --trace: every span of the run (its first trace::kMaxEvents), recorded from before the
  // workers start until they are joined.
  if (a.trace) trace::Recorder::global().start();
  // Where the ranks run (collective over them all): kept in rank 0's record.
  if (ranks::initialized()) loop.set_placement(placement_provenance(ranks::placement()));
  if (plan.moe && plan.backend == nullptr) {
    MoeLocalTrainer trainer(plan.config, *plan.moe, train);
    loop(trainer);
  } else if (plan.backend == nullptr) {
    LocalTrainer trainer(plan.config, train);
    loop(trainer);
  } else {
    TrainConfig per_rank = plan.config;
    per_rank.batch = a.batch;
    const auto each_rank = [&loop](RankTrainer& t) { loop(t); };
    if (plan.mode != nullptr)
      plan.mode->run(plan.dist, per_rank, train, each_rank);
    else
      plan.backend->run(plan.dist, per_rank, train, each_rank);
    if (ranks::initialized() && ranks::world_rank() != 0) return 0;  // rank 0 writes the run
  }
  return finish_run(a, loop);
}

const bool registered = register_command(
    {"train", "train the MLP on Fashion-MNIST with progress; record and chart the run",
     &train_main});

}  // namespace

}  // namespace concurdl::nn
