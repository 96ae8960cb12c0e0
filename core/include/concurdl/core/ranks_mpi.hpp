// The MPI side of ranks.hpp, for chapter code built with MPI (concurdl_add_chapter(... REQUIRES
// mpi)): the communicator of the configuration now running, world ranks 0..ranks-1.
#pragma once

#define OMPI_SKIP_MPICXX 1  // the C API is all the suite uses; the C++ bindings need libmpi_cxx
#include <mpi.h>

#include "concurdl/core/ranks.hpp"

namespace concurdl::ranks {

// MPI_COMM_NULL on a rank that does not take part in the current configuration, and outside
// a configuration of an experiment whose ranks are processes.
MPI_Comm comm();

}  // namespace concurdl::ranks
