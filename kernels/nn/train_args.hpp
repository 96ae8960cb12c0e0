// `concurdl train`'s flags as parsed (train_options.cpp), and what the ones about several workers
// resolve to (train_workers.cpp): a registered data-parallel backend, or a registered training
// mode, by the rules each mode's row brings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/moe_trainer.hpp"
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
  // Several workers: 0 ranks means not given.
  std::size_t ranks = 0;
  std::string backend, allreduce, hostfile;
  double bucket_mb = -1;
  bool overlap = false;
  bool shard_update = false;  // --shard-update
  int zero = -1;              // --zero STAGE (sharded data parallelism); -1: not given
  bool threads_given = false;
  std::vector<std::string> given;       // the flags given on the command line ("--ranks", ...)
  std::string mode = "sync";            // --mode
  std::vector<std::string> stragglers;  // "RANK:FACTOR"
  std::string fail_worker;              // "RANK:STEP"
  // The training modes' own flags (TrainingMode::flags) as typed, and their toggles; given
  // ones go to DistributedOptions::values.
  std::map<std::string, std::string> mode_values;
  std::map<std::string, bool> mode_toggles;
  bool trace = false;  // --trace: the run's spans, trace.json and a Gantt chart
  // --moe-experts E: a mixture-of-experts block inside the MLP (moe_trainer.hpp); 0: dense.
  std::size_t moe_experts = 0, moe_top_k = 1, moe_after = 1, moe_hidden = 0;
  double capacity_factor = 1.25;
  bool moe_dropless = false;
  float moe_aux = 0.01f;
};

// What --ranks, --backend, --mode, the modes' own flags and their companions resolve to: no
// backend (one trainer), a data-parallel backend, or a training mode on one. Checks every
// combination and value (a UsageError naming the flag), and sets a.threads as the workers need (1
// per thread rank, the machine's cores shared among MPI ranks unless --threads was given).
// `given(flag)`: whether the command line set it.
struct TrainWorkers {
  const DistributedBackend* backend = nullptr;
  const TrainingMode* mode = nullptr;  // null: sync
  DistributedOptions options;
};
using Given = std::function<bool(const char*)>;
TrainWorkers resolve_workers(TrainArgs& a, const Given& given);

// The flags (train_options.cpp): nullopt after --help; UsageError naming the flag whose value
// is out of its range, or CLI11's one line for an unknown flag.
std::optional<TrainArgs> parse_train_args(const std::vector<std::string>& args);
// The model's configuration the flags give (architecture, batch, SGD, threads, GEMM).
TrainConfig make_config(const TrainArgs& a);
// --moe-experts and its companions: nullopt for a dense run. UsageError naming the flag for a
// companion without --moe-experts, a flag the MoE trainer does not combine with (--ranks,
// --mode, a training mode's flags, --precision other than fp32) or a value out of range.
// check_moe_flags needs only the flags (call it first); moe_block checks against the spec.
void check_moe_flags(const TrainArgs& a, const Given& given);
std::optional<MoeBlock> moe_block(const TrainArgs& a, const MlpSpec& spec);
// UsageError naming `flag` when the directory that would hold `p` does not exist.
void check_writable_parent(const std::string& flag, const std::filesystem::path& p);

}  // namespace concurdl::nn
