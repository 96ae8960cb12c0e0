// Chapter 07's entry in the harness; its experiment registers in experiments_training.cpp
// (ch07/training); its exercises in exercises.cpp (their timings: component_trials.cpp), its
// training modes in train_modes.cpp.
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered = concurdl::register_chapter(
    {"07-sync-async-training",
     "Synchronous vs asynchronous training: all-reduce SGD, parameter servers, SSP, Hogwild!, "
     "local SGD, stragglers"});
}  // namespace
