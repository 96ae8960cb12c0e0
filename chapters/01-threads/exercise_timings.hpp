// The timed halves of chapter 01's exercises: each builds the experiment that times the
// student's code against its reference row, in the file that measures that row
// (experiments_reduction.cpp, experiments_pool.cpp). exercises.cpp registers the exercises.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::threads::exercise_timings {

Experiment thread_sum();  // 1.1: student_thread_sum vs v7_local_sums, compute-bound, 2M floats
Experiment padded_sum();  // 1.2: student_padded_sum vs v3_padded_partials, memory-bound, 4M
Experiment pool();        // 1.3: the student's pool vs ThreadPool, a batch of tiny tasks

}  // namespace concurdl::threads::exercise_timings
