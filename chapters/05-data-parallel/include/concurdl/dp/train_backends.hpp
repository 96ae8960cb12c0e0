// The data-parallel backends `concurdl train --ranks N --backend NAME` runs on
// (kernels/nn/distributed_train.hpp): threads, mpi, and nccl, which refuses (the trainer keeps the
// MLP on the CPU). train_registration.cpp registers them with the program; tests take them from
// here.
#pragma once

#include <vector>

#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::dp {

std::vector<nn::DistributedBackend> train_backends();

}  // namespace concurdl::dp
