// `concurdl train`'s flags as parsed (train_options.cpp), and what the ones about several workers
// resolve to (train_workers.cpp): chapter 05's data-parallel backends and chapter 07's modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::nn {

struct TrainArgs {
  std::size_t epochs = 10;
  std::size_t batch = TrainConfig{}.batch;
  float lr = SgdOptions{}.lr, momentum = SgdOptions{}.momentum,
        weight_decay = SgdOptions{}.weight_decay, lr_decay = TrainConfig{}.lr_decay;
  int threads = static_cast<int>(hardware_threads());
  std::uint64_t seed = 1;
  std::string arch = MlpSpec{}.describe();
  std::string gemm = "openblas";
  std::string precision = "fp32";  // --precision: fp32, bf16 or fp16
  std::size_t train_limit = 0, test_limit = 0;
  std::string data, checkpoint, resume, out = "results/runs";
  bool no_report = false, quiet = false;
  // Data parallel (chapter 05): 0 ranks means not given.
  std::size_t ranks = 0;
  std::string backend, allreduce, hostfile;
  double bucket_mb = -1;
  bool overlap = false;
  bool push_pull = false;  // --push-pull (chapter 07's shard processes)
  int zero = -1;           // --zero STAGE (sharded data parallelism); -1: not given
  bool threads_given = false;
  std::vector<std::string> given;  // the flags given on the command line ("--ranks", ...)
  // Synchronous vs asynchronous (chapter 07).
  std::string mode = "sync";
  std::vector<std::string> stragglers;  // "RANK:FACTOR"
  int staleness = -1, local_steps = -1, servers = -1, server_hosts = 0;
  std::string fail_worker;  // "RANK:STEP"
  // Pipeline parallelism (chapter 06): 0 stages means not given.
  std::size_t pipeline = 0, micro_batches = 0;
  std::string schedule;
  bool recompute = false;  // --recompute
  int chunks = 0;          // --chunks: interleaved's model chunks per stage (0: not given)
  // 3D parallelism (chapter 06): --dp D --tp T --pp P (0: not given, 1 when another is).
  int dp = 0, tp = 0, pp = 0;
  bool trace = false;  // --trace: the run's spans, trace.json and a Gantt chart
};

// What --ranks, --backend, --mode, --pipeline and their companions resolve to: no backend (one
// trainer), a data-parallel backend, or a training mode on one. Checks every combination and value
// (a UsageError naming the flag), and sets a.threads as the workers need (1 per thread rank, the
// machine's cores shared among MPI ranks unless --threads was given). `given(flag)`: whether the
// command line set it.
struct TrainWorkers {
  const DistributedBackend* backend = nullptr;
  const TrainingMode* mode = nullptr;  // null: sync
  DistributedOptions options;
};
TrainWorkers resolve_workers(TrainArgs& a, const std::function<bool(const char*)>& given);

// The flags (train_options.cpp): nullopt after --help; UsageError naming the flag whose value
// is out of its range, or CLI11's one line for an unknown flag.
std::optional<TrainArgs> parse_train_args(const std::vector<std::string>& args);
// The model's configuration the flags give (architecture, batch, SGD, threads, GEMM).
TrainConfig make_config(const TrainArgs& a);
// UsageError naming `flag` when the directory that would hold `p` does not exist.
void check_writable_parent(const std::string& flag, const std::filesystem::path& p);

}  // namespace concurdl::nn
