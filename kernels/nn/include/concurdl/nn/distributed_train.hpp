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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/nn/moe_trainer.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::nn {

// The faults a run injects into its workers, which every backend and mode honours: the base of
// DistributedOptions and of the trainers' own options.
struct WorkerFaults {
  // --straggler RANK:FACTOR: that worker's compute takes FACTOR times as long (it sleeps
  // (FACTOR - 1) x its compute time after each step's compute).
  std::map<int, double> stragglers;
  // --fail-worker RANK:STEP: that worker throws after STEP of its steps (the asynchronous modes
  // drop it and go on; -1: none).
  int fail_worker = -1;
  std::uint64_t fail_after = 0;
  // The slow-down factor of `worker` (1 when it is not a straggler).
  double straggler(int worker) const {
    const auto it = stragglers.find(worker);
    return it == stragglers.end() ? 1.0 : it->second;
  }
  // Whether `worker`, having taken `steps` steps, is to fail now.
  bool fails(int worker, std::uint64_t steps) const {
    return worker == fail_worker && steps >= fail_after;
  }
};

// What `concurdl train` passes to a backend besides the training configuration (whose `batch`
// is the per-rank batch: the global batch is ranks x batch); the injected faults are its base.
struct DistributedOptions : WorkerFaults {
  int ranks = 1;
  std::string backend = "threads";
  double bucket_mb = -1;             // < 0: the backend's default; 0: one bucket per layer
  bool overlap = false;              // all-reduce finished buckets while backward goes on
  std::string allreduce = "native";  // an all-reduce algorithm of the backend's table
  int zero = -1;                     // ZeRO stage 0-3 (chapter 05's sharded trainer); -1: plain
  bool shard_update = false;         // each rank updates its block of the summed gradient
  // How the workers combine their work (`--mode`); "sync" is the data-parallel all-reduce of
  // the backends above, the others are TrainingModes.
  std::string mode = "sync";
  // Where the training set came from, for backends whose workers load it themselves (chapter
  // 07's worker processes): the Fashion-MNIST directory and --train-limit.
  std::filesystem::path data;
  std::size_t train_limit = 0;
  std::string gemm = "openblas";
  // --moe-experts E and its flags: the mixture-of-experts block inside the MLP, for a mode
  // that trains it over ranks (chapter 06's expert parallelism); absent without the flag.
  std::optional<MoeBlock> moe;
  // --hostfile for a backend that reads it (DistributedBackend::reads_hostfile): the hosts its
  // processes run on ("": this machine). For an MPI launch mpirun takes it instead.
  std::filesystem::path hostfile;
  // The flags the training modes bring (TrainingMode::flags), as given: "--staleness" -> "2";
  // a toggle given is "1". A flag not given is absent.
  std::map<std::string, std::string, std::less<>> values;
  // A mode's flag as a whole number (its range was checked when parsed), or `otherwise` when
  // it was not given.
  long long number(std::string_view flag, long long otherwise) const;
  std::string text(std::string_view flag, std::string_view otherwise) const;
  bool toggle(std::string_view flag) const { return values.count(flag) > 0; }
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
  // Its ranks are MPI processes: `concurdl train` re-executes itself under mpirun first (and
  // passes --hostfile to mpirun).
  bool mpi_launch = false;
  // It starts processes of its own on the hosts of --hostfile (DistributedOptions::hostfile).
  bool reads_hostfile = false;
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

// A flag a training mode brings to `concurdl train` (`--staleness`): declared in the mode's row,
// parsed by the command into DistributedOptions::values. Modes that share a flag declare it
// alike (register_training_mode checks).
struct ModeFlag {
  enum class Kind { number, text, toggle };
  std::string name;  // "--staleness"
  std::string help;  // one line for --help
  Kind kind = Kind::number;
  long long min = 0, max = 1 << 20;  // a number's range, checked when parsed
};

// A training mode of `concurdl train` other than "sync" (chapter 06 registers pipeline, 3d and
// expert, chapter 07 ps-async, ps-ssp, hogwild and local-sgd). The row brings the mode's rules:
// its flags, how it is chosen, what it refuses, how many ranks it asks for and how it starts.
// Most modes' workers are threads of this process (or processes it starts), and run() calls
// `loop` once, on one RankTrainer (rank 0 of 1, the writer) that drives all options.ranks
// workers inside run_epoch; a mode whose ranks are a backend's (expert: threads or MPI
// processes) calls it on every rank, as a backend does.
struct TrainingMode {
  std::string name;  // "ps-async"
  std::string what;  // one line for --help
  // The flags that belong to this mode: `concurdl train` refuses one given with a mode that
  // does not list it, naming how to choose the modes that do. The mode's check says what else
  // each needs.
  std::vector<ModeFlag> flags;
  // The flags that choose it instead of --mode NAME ({"--pipeline"}, {"--dp", "--tp", "--pp"}),
  // each among `flags`; when two modes' flags are given, a mode that owns every chooser given
  // of the other wins (--ep 2 --dp 2 is expert parallelism, --dp 2 alone the 3D grid); with them,
  // `chosen_as` names them in messages ("--pipeline P") and `ranks` says how many ranks the options
  // ask for. Empty: --mode NAME with --ranks N.
  std::vector<std::string> chosen_by;
  std::string chosen_as;
  std::function<int(const DistributedOptions&)> ranks;
  // Flags of the command that do not combine with it, and why (a parenthesis ending the
  // message "--ranks: not with --pipeline (...)"). 16-bit precision is refused by every mode.
  std::vector<std::string> refuses;
  std::string refusal;
  // The --backend values it runs on (the first is the default).
  std::vector<std::string> backends = {"threads"};
  // Its ranks take each step together on a global batch of ranks x --batch rows, as sync's do
  // (the records' batch); otherwise --batch is what one step of the mode takes.
  bool global_batch = false;
  // Non-empty: it trains the mixture-of-experts block of --moe-experts over its ranks
  // (DistributedOptions::moe), and this says how, for messages ("--ep P [--dp D]: experts spread
  // over P ranks, D such groups"). With the block, every other mode and --ranks are refused.
  std::string trains_moe;
  // As DistributedBackend::check: UsageError for options it cannot run, before any data.
  std::function<void(const DistributedOptions&, const TrainConfig&)> check;
  std::function<void(const DistributedOptions&, const TrainConfig&, const Dataset& train,
                     const RankLoop& loop)>
      run;
  // "--pipeline P" or "--mode ps-async": how a user chooses it.
  std::string how_chosen() const { return chosen_by.empty() ? "--mode " + name : chosen_as; }
  bool owns(std::string_view flag) const;
};

// std::logic_error on a duplicate name, a chooser flag it does not own, or a flag declared
// otherwise by another mode.
bool register_training_mode(TrainingMode m);
const TrainingMode* find_training_mode(std::string_view name);
std::vector<std::string> training_mode_names();  // "sync" first, then the registered ones
// Every registered mode's flags, each once, in the order first registered.
std::vector<ModeFlag> training_mode_flags();

}  // namespace concurdl::nn
