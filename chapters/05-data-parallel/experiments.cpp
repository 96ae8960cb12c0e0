// Chapter 05's registrations with the harness. So far only the chapter itself: its experiments
// (collective bandwidth per algorithm and backend, data-parallel training) come next, on the
// communicator of include/concurdl/dp/.
#include "concurdl/harness/experiment.hpp"

namespace {

const bool registered_chapter = concurdl::register_chapter(
    {"05-data-parallel", "Collectives and data-parallel training: threads, MPI and NCCL"});

}  // namespace
