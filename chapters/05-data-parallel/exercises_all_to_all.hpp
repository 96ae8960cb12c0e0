// The timed half of exercise 5.5 (exercises_all_to_all.cpp): the student's all-to-all with
// variable counts against all_to_all_v_pairwise, on thread ranks. exercises.cpp registers it.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::dp::exercise_timings {

Experiment all_to_all_v();  // 5.5: student_all_to_all_v vs all_to_all_v_pairwise

}  // namespace concurdl::dp::exercise_timings
