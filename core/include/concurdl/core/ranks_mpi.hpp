// The MPI side of ranks.hpp, for chapter code built with MPI (concurdl_add_chapter(... REQUIRES
// mpi)): the communicator of the configuration now running, world ranks 0..ranks-1.
#pragma once

#define OMPI_SKIP_MPICXX 1  // the C API is all the suite uses; the C++ bindings need libmpi_cxx
#include <mpi.h>

#include <vector>

#include "concurdl/core/ranks.hpp"

namespace concurdl::ranks {

// MPI_COMM_NULL on a rank that does not take part in the current configuration, and outside
// a configuration of an experiment whose ranks are processes.
MPI_Comm comm();

// Every rank's host, in `comm`'s rank order: 0 .. hosts - 1, hosts numbered by their lowest rank.
// A host is what MPI calls a shared-memory node (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED): a machine, or a simulated host of scripts/cluster. Collective over
// `comm`; placement() uses it over the world, chapter 05 over a configuration's ranks.
std::vector<int> hosts_of(MPI_Comm comm);

}  // namespace concurdl::ranks
