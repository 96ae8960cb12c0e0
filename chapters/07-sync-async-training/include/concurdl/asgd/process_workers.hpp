// The parameter server with its workers as separate processes (`concurdl train --mode ps-async
// --backend processes`): what a dead worker looks like when it really is a dead process.
//
//      concurdl train (the server: ParameterServer, one thread)
//        │  socketpair  │  socketpair  │  socketpair
//   concurdl ps-worker  concurdl ps-worker  concurdl ps-worker      (fork + exec, one each)
//
// The server hands each idle worker a task (a batch of the epoch, the parameters and their
// version); the worker computes the gradient on it and sends it back; the server applies it at
// once (one SGD step) and hands that worker its next task. A worker process that dies, whether
// it crashed or was killed with SIGKILL (`--fail-worker RANK:STEP` makes the server do exactly
// that), shows up as end-of-file on its socket: the server drops it, puts its batch back at the
// head of the queue, and goes on with the others. That is why the transport is a socket per
// worker and not MPI: under MPI a dead rank ends the whole job. ps-ssp runs the same way, with
// a worker handed no task while it is more than s steps ahead of the slowest.
//
// Messages are little-endian frames on a stream socket: the worker's hello (its parameter
// count), the server's task or stop, the worker's result (batch, version seen, loss sum, correct,
// rows, gradient).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/asgd/async_trainer.hpp"
#include "concurdl/asgd/parameter_server.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::asgd {

// What a worker process needs to rebuild the server's view of the data and the model.
struct WorkerLaunch {
  std::filesystem::path executable;  // the concurdl program (default: this process's own)
  std::filesystem::path data;        // the Fashion-MNIST directory
  std::size_t train_limit = 0;       // as --train-limit
  std::string gemm = "openblas";
};

class ProcessPsTrainer final : public nn::RankTrainer {
 public:
  // Starts options.workers worker processes and waits for each to say hello. options.mode is
  // ps-async or ps-ssp.
  ProcessPsTrainer(nn::TrainConfig config, const nn::Dataset& train, AsyncOptions options,
                   WorkerLaunch launch);
  ~ProcessPsTrainer() override;  // stops and reaps every live worker

  int rank() const override { return 0; }
  int size() const override { return 1; }
  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                            std::size_t report_every) override;
  nn::EvalResult evaluate(const nn::Dataset& d) override;
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;
  std::map<std::string, double> epoch_metrics() const override;

  std::vector<float> parameters() const;
  int workers_alive() const;

 private:
  struct Worker;
  void drop(Worker& w, const std::string& why);
  nn::TrainConfig config_;
  const nn::Dataset& train_;
  AsyncOptions options_;
  Mode mode_ = Mode::ps_async;  // options_.mode's row
  nn::TrainState state_;
  std::unique_ptr<ParameterServer> server_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<nn::Mlp> eval_model_;
  StalenessLog staleness_;
  std::vector<std::size_t> batches_;
  std::uint64_t requeued_ = 0, ssp_max_lead_ = 0;
};

// The `ps-worker` command's body: serves tasks on file descriptor `fd` until told to stop or the
// server goes away. Returns the exit code.
int ps_worker_main(const std::vector<std::string>& args);

}  // namespace concurdl::asgd
