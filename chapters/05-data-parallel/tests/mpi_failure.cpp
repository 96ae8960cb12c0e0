// A rank that fails while the others wait on it: the job must end, quickly, with the failing
// rank's message, never hang. Run by tests/mpi_failure.sh under mpirun (ctest
// ch05.mpi.failure.throw and ch05.mpi.failure.kill):
//   mpi_failure throw   rank 1 throws an exception nobody catches, in the middle of a ring
//   mpi_failure kill    rank 1 is killed (SIGKILL): no message, no MPI_Finalize, no goodbye
// Every other rank is blocked in a receive from its left neighbour or in an all-reduce when it
// happens, which is where a training job's ranks would be.
#include <signal.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/ranks.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/mpi_backend.hpp"

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "throw";
  concurdl::ranks::init();
  concurdl::dp::MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<float> grad(1 << 16, 1.0f);
  comm.all_reduce(grad);  // everyone is up and connected
  if (comm.rank() == 1) {
    std::fprintf(stderr, "rank 1: failing now (%s)\n", how.c_str());
    if (how == "kill") raise(SIGKILL);
    throw std::runtime_error("rank 1 failed on purpose: gradient buffer corrupted");
  }
  // The others wait for rank 1: a receive from it, then a collective it never joins.
  std::vector<float> block(1024);
  if (comm.rank() == 0) comm.recv(1, block, 7);
  comm.all_reduce(grad);
  std::fprintf(stderr, "rank %d: finished, which it must not\n", comm.rank());
  return 0;
}
