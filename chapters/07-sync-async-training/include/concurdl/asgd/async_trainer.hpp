// The asynchronous training modes of `concurdl train --mode ...`, on worker threads of this
// process (the synchronous mode is chapter 05's DataParallelTrainer):
//
//   ps-async   workers pull the parameters from a ParameterServer, compute a gradient on their
//              next batch, push it; the server applies every push at once (never waits).
//   ps-ssp     the same, but a worker more than s steps ahead of the slowest waits (SspClock).
//   hogwild    no server: workers read and update one shared copy without locks (hogwild.hpp).
//   local-sgd  every worker trains its own replica alone; every H steps the replicas are
//              averaged (an all-reduce over chapter 05's threads communicator).
//
// Batches: in the first three, the epoch's permutation (nn::epoch_permutation of seed and
// epoch, as nn::Trainer draws it) is cut into batches of config.batch rows and each worker takes
// the next one not yet taken, so a fast worker takes more of them: an epoch is every sample
// once, whoever computed it. local-sgd deals batch k to worker k mod N (its averages need every
// worker at the same step). Each push is one SGD step with a batch of config.batch rows, so N
// workers take about N times the steps of the synchronous mode, whose step is N batches.
//
// The learning rate follows the epoch (lr x decay^epoch), set at each epoch's start. A worker
// that throws (--fail-worker, or a real failure) is dropped: the others go on, its batch is
// lost, the epoch's samples say so, and epoch_metrics() counts it in workers_lost (local-sgd is
// synchronous at its averages and fails as a whole instead). Stragglers sleep after their
// compute (nn::straggle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "concurdl/asgd/parameter_server.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::asgd {

inline constexpr int kDefaultStaleness = 4;   // ps-ssp's s
inline constexpr int kDefaultLocalSteps = 8;  // local-sgd's H
inline constexpr int kMaxWorkers = 256;

struct AsyncOptions : nn::WorkerFaults {  // stragglers and a failing worker, by worker id
  std::string mode = "ps-async";          // a row of kModes other than sync
  int workers = 2;
  int staleness = kDefaultStaleness;
  int local_steps = kDefaultLocalSteps;
  int servers = 1;
};

// The training modes chapter 07 compares, a row each, simplest first: the `mode` axis of
// ch07/training, the train command's --mode, the tests and the README's table come from it.
// `sync` is chapter 05's data parallelism (the baseline); the others are this trainer's.
enum class Mode { sync, ps_async, ps_ssp, hogwild, local_sgd };
struct ModeRow : VariantInfo {
  Mode mode;
  bool parameter_server;  // updates go through a ParameterServer (--backend processes runs these)
};
inline constexpr ModeRow kModeRows[] = {
    {{"sync",
      "every worker an identical replica: a gradient on b rows, an all-reduce, the same SGD step "
      "everywhere (chapter 05); every worker waits for every other, every step"},
     Mode::sync,
     false},
    {{"ps-async",
      "a parameter server: pull (copy and version), gradient, push, and the server applies it at "
      "once; nobody waits, and gradients are stale"},
     Mode::ps_async,
     true},
    {{"ps-ssp",
      "the same, stale-synchronous: a worker whose clock (its finished steps) is more than "
      "--staleness s clocks ahead of the slowest worker's waits for it"},
     Mode::ps_ssp,
     true},
    {{"hogwild",
      "no server: the workers read and update one shared copy with relaxed atomic loads and "
      "stores, no lock; nobody waits"},
     Mode::hogwild,
     false},
    {{"local-sgd",
      "every worker trains its own replica with its own momentum; every --local-steps H steps "
      "the replicas' parameters are averaged (an all-reduce), and everyone waits there"},
     Mode::local_sgd,
     false},
};
inline constexpr VariantTable kModes{kModeRows, "mode"};

// Whether `name` is one of this trainer's modes (a row of kModes other than sync).
bool is_async_mode(const std::string& name);

// What the asynchronous trainers (AsyncTrainer, ProcessPsTrainer) share.
// save_global: a checkpoint of the global model, whose parameters and momentum `read` fills in
// (state carries the mode and worker count).
void save_global(
    const std::filesystem::path& checkpoint, const nn::TrainConfig& config,
    const nn::TrainState& state,
    const std::function<void(std::span<float> params, std::span<float> velocity)>& read);
// resume_global: loads a checkpoint of `mode` with `workers` workers (anything else is a
// CheckpointError naming both, before anything changes), hands its parameters, momentum and
// state to `write`, and returns the state to continue from.
nn::TrainState resume_global(
    const std::filesystem::path& checkpoint, const nn::TrainConfig& config, const std::string& mode,
    int workers,
    const std::function<void(std::span<const float> params, std::span<const float> velocity,
                             const nn::TrainState& state)>& write);
// The one progress report an asynchronous epoch gives, at its end.
void report_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                  const nn::TrainState& after, std::size_t steps, const nn::EpochResult& r);

class AsyncTrainer final : public nn::RankTrainer {
 public:
  // config.batch is each worker's batch; config.threads is ignored (each worker computes on one
  // thread: the setting is process-wide, so the trainer sets it to 1 while it runs).
  AsyncTrainer(nn::TrainConfig config, const nn::Dataset& train, AsyncOptions options);
  ~AsyncTrainer() override;

  int rank() const override { return 0; }
  int size() const override { return 1; }
  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                            std::size_t report_every) override;
  nn::EvalResult evaluate(const nn::Dataset& d) override;
  // The checkpoint's header names the mode and the worker count; resume refuses another's.
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;
  // StalenessLog::add_to (mean, p50, p99, max, the histogram, of the epoch's updates),
  // workers_lost, ssp_waits, ssp_max_lead, batches_min / batches_max (per worker).
  std::map<std::string, double> epoch_metrics() const override;

  // The global parameters now (the server's, the shared copy, or the average).
  std::vector<float> parameters() const;
  const StalenessLog& staleness() const { return staleness_; }
  const AsyncOptions& options() const { return options_; }
  // Batches each worker computed in the last epoch.
  const std::vector<std::size_t>& batches_per_worker() const { return batches_; }
  std::uint64_t ssp_max_lead() const { return ssp_max_lead_; }

 private:
  struct Worker;
  struct EpochSums;
  void run_ps(EpochSums& sums, float lr);
  void run_hogwild(EpochSums& sums, float lr);
  void run_local_sgd(EpochSums& sums, float lr);
  void check_failure(int w, std::uint64_t steps) const;

  nn::TrainConfig config_;
  const nn::Dataset& train_;
  AsyncOptions options_;
  Mode mode_ = Mode::ps_async;  // options_.mode's row
  nn::TrainState state_;
  std::vector<std::uint32_t> order_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<ParameterServer> server_;        // ps-*
  std::vector<float> shared_params_, shared_vel_;  // hogwild
  mutable std::unique_ptr<nn::Mlp> eval_model_;
  StalenessLog staleness_;
  std::vector<std::size_t> batches_;
  std::vector<bool> lost_;  // workers dropped so far (they stay dropped)
  std::uint64_t ssp_waits_ = 0, ssp_max_lead_ = 0;
};

}  // namespace concurdl::asgd
