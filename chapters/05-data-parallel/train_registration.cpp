// Chapter 05's data-parallel backends (src/train_backends.cpp) registered with `concurdl train`,
// and OpenMPI told to yield when idle in that command.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "concurdl/dp/train_backends.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::dp {

namespace {

// OpenMPI waits for a message by polling without ever giving up its core, unless it counts
// more ranks than cores itself (it does not see other processes). On a 2-core machine that
// also runs anything else, a rank spinning in MPI_Allreduce takes the core from the rank it
// waits for: measured on the shared 2-vCPU VM (2 epochs of 60000 images, 2 ranks, compute
// threads already 1 per rank), 48-55K samples/s spinning against 65-70K yielding, threads
// backend 66-89K in the same minutes. So `concurdl train` asks OpenMPI to yield when idle,
// unless the user set it: here, before main, so that it holds both in the process that
// starts mpirun (the ranks inherit the environment) and in ranks started by a user's own
// mpirun or srun (MPI_Init reads it later). Only for the train command: the collectives
// experiments of `concurdl run` measure latency and keep OpenMPI's default.
bool is_train_command() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t end0 = cmdline.find('\0');
  if (end0 == std::string::npos) return false;
  const std::size_t end1 = cmdline.find('\0', end0 + 1);
  return cmdline.substr(end0 + 1, end1 == std::string::npos ? end1 : end1 - end0 - 1) == "train";
}

const bool yield_when_idle = [] {
  if (is_train_command()) ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  return true;
}();

const bool registered = [] {
  for (nn::DistributedBackend& b : train_backends()) nn::register_distributed_backend(std::move(b));
  return true;
}();

}  // namespace

}  // namespace concurdl::dp
