// The timed halves of chapter 06's exercises: each builds the experiment that times the
// student's code against the chapter's own on thread ranks of chapter 05's communicator, in the
// file that measures that code (experiments_tensor.cpp, experiments_schedules.cpp). Every trial
// is checked after it runs, against one process's forward and backward of the unsplit layer or
// model. exercises.cpp registers the exercises.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::mp::exercise_timings {

Experiment column_parallel();  // 6.1: student_column_* vs ColumnParallelLinear, 784 -> 512
Experiment one_f_one_b();      // 6.2: student_1f1b_order vs stage_order's 1F1B
Experiment zb_h1();            // 6.3: student_zb_h1_order vs stage_order's ZB-H1

}  // namespace concurdl::mp::exercise_timings
