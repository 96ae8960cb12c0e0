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

#include <filesystem>
#include <functional>
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
};

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
};

using RankLoop = std::function<void(RankTrainer&)>;

struct DistributedBackend {
  std::string name;  // "threads"
  std::string what;  // one line for --help
  // "" when this program can run it here, else one line saying why not (a usage error).
  std::function<std::string()> missing;
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
