// The data-parallel backends `concurdl train --ranks N --backend NAME` runs on
// (kernels/nn/distributed_train.hpp): threads, mpi, and nccl, which refuses (the trainer keeps the
// MLP on the CPU). train_registration.cpp registers them with the program; tests take them from
// here.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "concurdl/dp/communicator.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::dp {

std::vector<nn::DistributedBackend> train_backends();

// Builds one rank's trainer over the communicator of every rank of the run, with the
// configuration as that rank is to run it (threads: its compute-thread setting left alone).
using RankTrainerFactory = std::function<std::unique_ptr<nn::RankTrainer>(
    Communicator& world, const nn::TrainConfig& config)>;
// Starts o.ranks ranks as o.backend does ("threads": threads of this process, one compute
// thread each, a trace track each; "mpi": this process's rank of the launch, the whole launch
// aborted with a rank's message when one fails), builds each rank's trainer with `make` and
// runs `loop` on it: the threads and mpi backends with a trainer of a chapter's own (chapter
// 06's expert parallelism). UsageError for another backend.
void run_ranks(const nn::DistributedOptions& o, const nn::TrainConfig& c,
               const RankTrainerFactory& make, const nn::RankLoop& loop);

}  // namespace concurdl::dp
