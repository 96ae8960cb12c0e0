// Chapter 01's entry in the harness; each topic registers its experiments in its own
// experiments_*.cpp next to this file.
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered =
    concurdl::register_chapter({"01-threads", "Threads, processes, thread pools and OpenMP"});
}  // namespace
