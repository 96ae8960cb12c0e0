// Chapter 02's entry in the harness; each topic registers its experiments in its own
// experiments_*.cpp next to this file, and the micro-benchmarks live in bench/.
//   concurdl run ch02          every experiment, quick profile
//   concurdl exercise ch02     exercises 2.1 to 2.5
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered =
    concurdl::register_chapter({"02-locks", "Locks, lock-free structures, hazards and scheduling"});
}  // namespace
