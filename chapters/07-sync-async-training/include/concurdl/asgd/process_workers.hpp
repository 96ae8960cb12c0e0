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
// Across hosts (`--hostfile F`): worker w runs on the hostfile's host w mod H, started there
// through a remote shell (CONCURDL_RSH, else Open MPI's OMPI_MCA_plm_rsh_agent, which
// scripts/cluster sets, else ssh), and connects back to the server over TCP. Its death is the
// same end of file, now of a TCP connection; `--fail-worker` then has the server tell the worker
// to SIGKILL itself, as it cannot signal a process on another host.
//
// Shards as processes (`--server-hosts N` with `--hostfile`): the --servers shards run as
// `concurdl ps-shard` processes on the hostfile's first N hosts (shard s on host s mod N) and the
// workers on the others, the layout of a parameter server proper (Li et al., OSDI 2014):
//
//      concurdl train (the server: hands out batches, keeps the clocks; holds no parameters)
//        │ TCP                │ TCP                     │ TCP
//   ps-shard 0 ... ps-shard K-1  (hosts 0..N-1)     ps-worker 0 ... (hosts N..H-1)
//        ^──────── pull / push, a connection from every worker to every shard ──────┘
//
// A task then carries no parameters: the worker pulls each shard's range from that shard,
// computes, pushes each range back and tells the server the batch is done (with the staleness
// the shards saw). A shard applies a push whole or, when its worker dies halfway, not at all; a
// worker killed between its pushes to two shards leaves its gradient applied on the first only,
// and its batch is run again. A shard holds the only copy of its range (no replication), so a
// dead shard ends the run, with an error naming it.
//
// Messages are little-endian frames on a stream socket: the worker's hello (its number and
// parameter count), the server's task, stop or die, the worker's result (batch, version seen,
// loss sum, correct, rows, gradient); the shards' frames are in worker_links.hpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
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
  // The hosts the workers run on (an MPI-style hostfile: a host a line, `slots=` ignored); empty:
  // this machine, over socket pairs.
  std::filesystem::path hostfile;
  // With a hostfile: the first server_hosts hosts run the shards as processes and the workers
  // run on the rest (0: the shards are in the server's process, the workers on every host).
  int server_hosts = 0;
  // With shard processes, ps-async: each push's answer carries the shard's parameters after it,
  // and the worker computes its next batch on them instead of pulling again (one request fewer
  // a step, and parameters older by the wait for the next task).
  bool push_pull = false;
};

// The hosts of an MPI-style hostfile, in order: the first word of each line that is not blank
// or a comment. UsageError naming the file when it cannot be read or names none.
std::vector<std::string> read_hostfile(const std::filesystem::path& hostfile);

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
  struct Shard;
  std::vector<std::string> worker_args(const WorkerLaunch& launch, int w) const;
  void start_local(const WorkerLaunch& launch);
  void start_remote(const WorkerLaunch& launch);
  // server_at(host): the trainer's ADDR:PORT as seen from that host, one shell word.
  std::string start_shards(const WorkerLaunch& launch, const std::vector<std::string>& rsh,
                           int listener,
                           const std::function<std::string(const std::string&)>& server_at);
  void check_hello(const Worker& w, std::uint64_t parameters) const;
  void abandon();
  void drop(Worker& w, const std::string& why);
  // The server's parameters, in this process or in the shard processes.
  void set_lr(float lr);
  void read_state(std::span<float> params, std::span<float> velocity) const;
  void write_state(std::span<const float> params, std::span<const float> velocity,
                   std::uint64_t version);
  [[noreturn]] void shard_lost(const Shard& s) const;
  void check_shards() const;  // shard_lost for the first shard whose connection has ended
  nn::TrainConfig config_;
  const nn::Dataset& train_;
  AsyncOptions options_;
  Mode mode_ = Mode::ps_async;  // options_.mode's row
  nn::TrainState state_;
  std::size_t parameters_ = 0;
  std::unique_ptr<ParameterServer> server_;  // without shard processes
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<nn::Mlp> eval_model_;
  StalenessLog staleness_;
  std::vector<std::size_t> batches_;
  std::uint64_t requeued_ = 0, ssp_max_lead_ = 0;
  std::vector<std::string> hosts_;  // the hostfile's, across hosts; empty on this machine
  int server_hosts_ = 0;
  bool push_pull_ = false;
};

// The `ps-worker` command's body: serves tasks on file descriptor `fd` (--fd) or on a TCP
// connection to the server (--connect ADDR:PORT) until told to stop or the server goes away.
// Returns the exit code.
int ps_worker_main(const std::vector<std::string>& args);
// The `ps-shard` command's body: one shard (--server-hosts) until the server says stop or goes.
int ps_shard_main(const std::vector<std::string>& args);

}  // namespace concurdl::asgd
