// The timed halves of chapter 07's exercises: each builds the experiment that times the
// student's code against the chapter's own, off the training loop, on the sizes the chapter's
// training moves (component_trials.cpp, the trials of the parameter server, the SSP clock and
// Hogwild's step). exercises.cpp registers the exercises.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::asgd::exercise_timings {

Experiment parameter_server();  // 7.1: StudentParameterServer vs ParameterServer, pull and push
Experiment ssp_clock();         // 7.2: StudentSspClock vs SspClock, unequal workers under bound 1
Experiment hogwild();           // 7.3: student_hogwild_step vs hogwild_step, 1 and 2 threads

}  // namespace concurdl::asgd::exercise_timings
