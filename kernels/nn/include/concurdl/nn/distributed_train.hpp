// Data-parallel training backends for `concurdl train --ranks N --backend NAME`, registered by
// name at static-initialisation time (as experiments are), so that the training stack does not
// depend on the chapter that implements them: chapter 05 registers "threads", "mpi" and "nccl"
// (chapters/05-data-parallel/src/train_backends.cpp).
//
// A backend starts N ranks (threads of this process, or MPI processes already launched by
// mpirun), gives each rank a RankTrainer over its replica of the model, and runs the command's
// training loop on every rank. The loop is the same code on every rank; rank 0 (writer()) alone
// evaluates, records, prints and writes checkpoints; every rank resumes from the checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/nn/trainer.hpp"

namespace concurdl::nn {

// What `concurdl train` passes to a backend besides the training configuration (whose `batch`
// is the per-rank batch: the global batch is ranks x batch).
struct DistributedOptions {
  int ranks = 1;
  std::string backend = "threads";
  double bucket_mb = -1;             // < 0: the backend's default; 0: one bucket per layer
  bool overlap = false;              // all-reduce finished buckets while backward goes on
  std::string allreduce = "native";  // an all-reduce algorithm of the backend's table
  int zero = -1;                     // ZeRO stage 0-3 (chapter 05's sharded trainer); -1: plain
  // Chapter 07: how the workers combine their work (`--mode`); "sync" is the data-parallel
  // all-reduce of the backends above, the others are TrainingModes.
  std::string mode = "sync";
  // --straggler RANK:FACTOR: that rank's compute takes FACTOR times as long (it sleeps
  // (FACTOR - 1) x its compute time after each step's compute). Every mode honours it.
  std::map<int, double> stragglers;
  int staleness = -1;    // ps-ssp: the bound s (< 0: the mode's default)
  int local_steps = -1;  // local-sgd: steps between averages H (< 0: the mode's default)
  int servers = -1;      // ps-*: parameter-server shards (< 0: the mode's default)
  // --fail-worker RANK:STEP: that worker throws after STEP steps (the asynchronous modes drop
  // it and go on; -1: none).
  int fail_worker = -1;
  std::uint64_t fail_after = 0;
  // Where the training set came from, for backends whose workers load it themselves (chapter
  // 07's worker processes): the Fashion-MNIST directory and --train-limit.
  std::filesystem::path data;
  std::size_t train_limit = 0;
  std::string gemm = "openblas";
  // --hostfile with --backend processes: the hosts chapter 07's worker processes run on ("":
  // this machine). With --backend mpi the launcher passes it to mpirun instead.
  std::filesystem::path hostfile;
  // --server-hosts N with it: the parameter-server shards run as processes on its first N hosts,
  // the workers on the others (0: the shards are in the trainer's process).
  int server_hosts = 0;
  bool push_pull = false;  // with it, ps-async: a push's answer is the worker's next pull
  // Chapter 06's pipeline (`--pipeline P`, mode "pipeline", ranks = P stages): micro-batches
  // per batch (0: the mode's default) and the schedule ("" : the mode's default).
  std::size_t micro_batches = 0;
  std::string schedule;
  bool recompute = false;  // the pipeline's activation recomputation
  int chunks = 0;          // interleaved's model chunks per stage (0: the mode's default)
  // Chapter 06's 3D parallelism (`--dp D --tp T --pp P`, mode "3d", ranks = D x T x P).
  int dp = 1, tp = 1, pp = 1;
  // The slow-down factor of `rank` (1 when it is not a straggler).
  double straggler_factor(int rank) const {
    const auto it = stragglers.find(rank);
    return it == stragglers.end() ? 1.0 : it->second;
  }
};

// Sleeps (factor - 1) x compute_s: a straggler's extra time after a step's compute. A sleep,
// not a spin, so that a slow worker is slow without taking a core from the others (as a slow
// machine would be).
void straggle(double factor, double compute_s);

// One rank's view of data-parallel training: the same calls as Trainer's, every rank in step.
class RankTrainer {
 public:
  virtual ~RankTrainer() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool writer() const { return rank() == 0; }
  // One epoch over the global batches; the result (loss, accuracy, samples) is over all ranks.
  // Every rank must call it; on_progress is called on every rank with the same numbers.
  virtual EpochResult run_epoch(const std::function<void(const StepProgress&)>& on_progress,
                                std::size_t report_every) = 0;
  // This rank's replica on `d` (every replica holds the same parameters).
  virtual EvalResult evaluate(const Dataset& d) = 0;
  virtual void save(const std::filesystem::path& checkpoint) const = 0;  // call on the writer only
  virtual void resume(const std::filesystem::path& checkpoint) = 0;      // call on every rank
  virtual const TrainState& state() const = 0;
  // One line for the start message: "2 ranks (threads), buckets 128 KiB, overlap on, native".
  virtual std::string describe() const = 0;
  // Figures of the epoch just run that the records should carry beside loss and accuracy
  // (chapter 07: staleness_mean, staleness_max, workers_lost, ...). Called on the writer.
  virtual std::map<std::string, double> epoch_metrics() const { return {}; }
};

using RankLoop = std::function<void(RankTrainer&)>;

struct DistributedBackend {
  std::string name;  // "threads"
  std::string what;  // one line for --help
  // "" when this program can run it here, else one line saying why not (a usage error).
  std::function<std::string()> missing;
  // Throws UsageError for options it cannot run (an unknown --allreduce); `concurdl train`
  // calls it before the data set is loaded or mpirun started, so bad input costs nothing.
  // Empty: run() checks on its own.
  std::function<void(const DistributedOptions&, const TrainConfig&)> check;
  // Its ranks are MPI processes: `concurdl train` re-executes itself under mpirun first.
  bool mpi_launch = false;
  // Runs `loop` on every rank (on this process's rank only, for MPI) and returns when all are
  // done; rethrows a rank's failure. Bad options (an unknown --allreduce) are UsageErrors.
  std::function<void(const DistributedOptions&, const TrainConfig&, const Dataset& train,
                     const RankLoop& loop)>
      run;
};

// Throws std::logic_error on a duplicate name.
bool register_distributed_backend(DistributedBackend b);
const DistributedBackend* find_distributed_backend(std::string_view name);
std::vector<std::string> distributed_backend_names();

}  // namespace concurdl::nn

namespace concurdl::nn {

// A training mode of `concurdl train --mode NAME` other than "sync" (chapter 07 registers
// ps-async, ps-ssp, hogwild and local-sgd). Its workers are threads of this process; run()
// calls `loop` once, on one RankTrainer (rank 0 of 1, the writer) that drives all
// options.ranks workers inside run_epoch.
struct TrainingMode {
  std::string name;  // "ps-async"
  std::string what;  // one line for --help
  // The flags that belong to this mode ("--staleness"): `concurdl train` refuses one given with
  // a mode that does not list it, naming the modes that do. The mode's check says what else
  // each needs.
  std::vector<std::string> flags;
  // The --backend values it runs on (the first is the default).
  std::vector<std::string> backends = {"threads"};
  // As DistributedBackend::check: UsageError for options it cannot run, before any data.
  std::function<void(const DistributedOptions&, const TrainConfig&)> check;
  std::function<void(const DistributedOptions&, const TrainConfig&, const Dataset& train,
                     const RankLoop& loop)>
      run;
};

bool register_training_mode(TrainingMode m);  // std::logic_error on a duplicate name
const TrainingMode* find_training_mode(std::string_view name);
std::vector<std::string> training_mode_names();  // "sync" first, then the registered ones

}  // namespace concurdl::nn
