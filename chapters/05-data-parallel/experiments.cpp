// Chapter 05's registration with the harness: the chapter itself (its folder, title and
// lesson). Its experiments register from their own files (experiments_*.cpp), its exercises
// from exercises.cpp.
#include "concurdl/harness/experiment.hpp"

namespace {

const bool registered_chapter = concurdl::register_chapter(
    {"05-data-parallel", "Collectives and data-parallel training: threads, MPI and NCCL"});

}  // namespace
