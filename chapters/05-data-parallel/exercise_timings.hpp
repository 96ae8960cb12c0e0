// The timed halves of chapter 05's exercises: each builds the experiment that times the
// student's code against its reference, in the file that measures that reference
// (experiments_collectives.cpp, experiments_train.cpp, experiments_zero.cpp). exercises.cpp
// registers the exercises.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::dp::exercise_timings {

Experiment ring();      // 5.1: the student's ring all-reduce vs v4_ring
Experiment bucketed();  // 5.2: the student's bucketed all-reduce with overlap vs the reference
Experiment zero2();     // 5.3: the student's ZeRO-2 steps vs zero_reduce_layer / zero_update_layer

}  // namespace concurdl::dp::exercise_timings
