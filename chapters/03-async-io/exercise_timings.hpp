// The timed halves of chapter 03's exercises: each builds the experiment that times the
// student's code against its reference, in the file that measures that reference
// (experiments_loaders.cpp, experiments_read.cpp). exercises.cpp registers the exercises.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::async_io::exercise_timings {

Experiment prefetch();  // 3.1: the student's prefetching loader vs the reference
Experiment reorder();   // 3.3: the student's reorder buffer vs the reference
#if CONCURDL_HAVE_URING
Experiment uring_read();  // 3.2: the student's batched io_uring read vs the reference
#endif

}  // namespace concurdl::async_io::exercise_timings
